"""The process's settings: every variable it reads from its environment, parsed and checked once at
start into one frozen ServerConfig (a bad value: one clear line each and exit 2, never a traceback
from deep inside gunicorn). `gpu-admission serve` builds the same object from its flags and
installs it (`use`) before gunicorn forks its worker, so nothing is handed on through the
environment. Nothing else under webhook/ reads os.environ (tests/edge/test_settings.py holds it
to that); the two variables libraries read themselves (KUBECONFIG, PROMETHEUS_MULTIPROC_DIR) are
read and written here too.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from certs.cert_files import CERT_FILE, KEY_FILE

DEFAULT_CERT_DIR = Path(".gpu-admission/certs")  # serve's, outside a cluster
IMAGE_CERT = "/etc/gpu-admission/certs/tls.crt"  # where the image's Secret volume puts them
IMAGE_KEY = "/etc/gpu-admission/certs/tls.key"
AUDIT_SECONDS_DEFAULT = 600.0
METRICS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own variable

# What each setting must be, checked all at once at start.
WHOLE = ("GPU_ADMISSION_THREADS", "GPU_ADMISSION_CONNECTIONS")
POSITIVE = ("GPU_ADMISSION_READ_TIMEOUT", "GPU_ADMISSION_CERT_SYNC_SECONDS")
NON_NEGATIVE = ("GPU_ADMISSION_AUDIT_SECONDS",)  # 0: the background audit off
BOOLEAN = (
    "GPU_ADMISSION_FAIL_OPEN",
    "GPU_ADMISSION_ALL_NAMESPACES",
    "GPU_ADMISSION_LABELLED_NAMESPACES",
    "GPU_ADMISSION_MANAGE_CERTS",
)
SWITCHES = ("GPU_ADMISSION_STRICT_SHARES",)  # 1 on (the default), 0 off
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def host_port(bind: str) -> tuple[str, int]:
    """host:port (an empty host: every address); ValueError says what is wrong."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{bind!r} is not host:port")
    return host.strip("[]"), int(port)


def environment_problems(env: Mapping[str, str]) -> list[str]:
    """One line per GPU_ADMISSION_* setting that is set to something the server cannot use."""
    problems = []
    for name in WHOLE:
        if name in env and not (env[name].isdigit() and int(env[name]) > 0):
            problems.append(f"{name}={env[name]!r} is not a positive whole number")
    for name in POSITIVE:
        if name in env and not ((_number(env[name]) or 0) > 0):
            problems.append(f"{name}={env[name]!r} is not a positive number")
    for name in NON_NEGATIVE:
        value = _number(env[name]) if name in env else 0.0
        if value is None or value < 0:
            problems.append(f"{name}={env[name]!r} is not a number of seconds, 0 or more")
    for name in BOOLEAN:
        if name in env and env[name] not in ("true", "false"):
            problems.append(f"{name}={env[name]!r} is not true or false")
    for name in SWITCHES:
        if name in env and env[name] not in ("0", "1"):
            problems.append(f"{name}={env[name]!r} is not 0 or 1")
    bind = env.get("GPU_ADMISSION_METRICS_BIND")
    if bind:
        try:
            host_port(bind)
        except ValueError as error:
            problems.append(f"GPU_ADMISSION_METRICS_BIND={error}")
    level = env.get("GPU_ADMISSION_LOG_LEVEL")
    if level is not None and level.upper() not in LEVELS:
        problems.append(f"GPU_ADMISSION_LOG_LEVEL={level!r} is not one of {', '.join(LEVELS)}")
    return problems


def require_valid_environment(env: Mapping[str, str]) -> None:
    """Every problem of the environment on a line of its own, then exit 2; nothing when it is sound."""
    problems = environment_problems(env)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        raise SystemExit(2)


@dataclass(frozen=True)
class ServerConfig:
    """Every setting of a replica, parsed and checked once: from the environment (`from_env`, the
    container's gunicorn) or from `serve`'s flags, so both run the same way."""

    policy_dirs: tuple[Path, ...] = ()
    fail_open: bool = False
    watch_namespace: str = ""  # the webhook's own namespace: connects it to the cluster
    all_namespaces: bool = False
    labelled_namespaces: bool = False  # team policies in namespaces labelled gpu-admission.io/policies=enabled
    manage_certs: bool = False  # certificates in Secrets of watch_namespace, renewed in the cluster
    service: str = "gpu-admission"
    # Names a self-managed serving certificate carries besides the Service's: the host of a
    # webhook reached by clientConfig.url (a DNS name or an IP address).
    serving_names: tuple[str, ...] = ()
    cert: Path = DEFAULT_CERT_DIR / CERT_FILE
    key: Path = DEFAULT_CERT_DIR / KEY_FILE
    client_ca: Path | None = None  # clients must present a certificate this CA signed
    bind: str = "127.0.0.1:8443"
    threads: int = 32
    connections: int = 512  # open at once; more are refused
    read_timeout: float = 5.0  # seconds a client has to send its request
    cert_sync_seconds: float = 30.0  # how often certificates, Secrets and caBundle are checked
    audit_seconds: float = AUDIT_SECONDS_DEFAULT  # how often the leader audits; 0: never
    metrics_bind: str = ""  # host:port of a plain-HTTP /metrics listener; "": /metrics on the webhook's port
    log_level: str = "INFO"
    strict_shares: bool = True  # strict budgets lend shares to replicas; off: a Lease write a pod
    replica: str = ""  # this replica's name (POD_NAME); "": host and process id

    @property
    def cert_dir(self) -> Path:
        return self.cert.parent

    @property
    def replica_name(self) -> str:
        """This replica's name: the one `from_env` resolved, or this process's."""
        return self.replica or process_name()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerConfig:
        """The settings of `env` (default: the process's); one line per bad setting and exit 2."""
        env = dict(os.environ if env is None else env)
        require_valid_environment(env)
        return cls(
            policy_dirs=tuple(Path(p) for p in env.get("GPU_ADMISSION_POLICIES", "").split(":") if p),
            fail_open=env.get("GPU_ADMISSION_FAIL_OPEN") == "true",
            watch_namespace=env.get("GPU_ADMISSION_WATCH_NAMESPACE", ""),
            all_namespaces=env.get("GPU_ADMISSION_ALL_NAMESPACES") == "true",
            labelled_namespaces=env.get("GPU_ADMISSION_LABELLED_NAMESPACES") == "true",
            manage_certs=env.get("GPU_ADMISSION_MANAGE_CERTS") == "true",
            service=env.get("GPU_ADMISSION_SERVICE", "gpu-admission"),
            serving_names=tuple(n.strip() for n in env.get("GPU_ADMISSION_SERVING_NAMES", "").split(",") if n.strip()),
            cert=Path(env.get("GPU_ADMISSION_CERT", IMAGE_CERT)),
            key=Path(env.get("GPU_ADMISSION_KEY", IMAGE_KEY)),
            client_ca=Path(env["GPU_ADMISSION_CLIENT_CA"]) if env.get("GPU_ADMISSION_CLIENT_CA") else None,
            bind=env.get("GPU_ADMISSION_BIND", "0.0.0.0:8443"),
            threads=int(env.get("GPU_ADMISSION_THREADS", "32")),
            connections=int(env.get("GPU_ADMISSION_CONNECTIONS", "512")),
            read_timeout=float(env.get("GPU_ADMISSION_READ_TIMEOUT", "5")),
            cert_sync_seconds=float(env.get("GPU_ADMISSION_CERT_SYNC_SECONDS", "30")),
            audit_seconds=float(env.get("GPU_ADMISSION_AUDIT_SECONDS", AUDIT_SECONDS_DEFAULT)),
            metrics_bind=env.get("GPU_ADMISSION_METRICS_BIND", ""),
            log_level=env.get("GPU_ADMISSION_LOG_LEVEL", "INFO").upper(),
            strict_shares=env.get("GPU_ADMISSION_STRICT_SHARES", "1") == "1",
            # Resolved here, once: in gunicorn's master, so its worker is the same replica.
            replica=env.get("POD_NAME", "") or process_name(),
        )


def process_name() -> str:
    """Who this process is where no name is set: its host and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


_current: ServerConfig | None = None


def use(config: ServerConfig) -> ServerConfig:
    """`config` as this process's settings (`serve`, before gunicorn forks: the worker inherits it)."""
    global _current
    _current = config
    return config


def current() -> ServerConfig:
    """This process's settings: those `use` installed, else the environment's, parsed once."""
    return _current if _current is not None else use(ServerConfig.from_env())


def kubeconfig() -> str | None:
    """KUBECONFIG, as kubectl reads it: at each call, since the CLI runs in-process in tests."""
    return os.environ.get("KUBECONFIG")


def metrics_directory() -> str | None:
    """Where prometheus_client keeps each process's figures, if the server shares them."""
    return os.environ.get(METRICS_DIRECTORY) or None


def share_metrics_directory() -> None:
    """Give the master and its worker one metrics directory (prometheus_client reads the variable
    before its first import, so it is set in the environment, the one place it can be)."""
    os.environ.setdefault(METRICS_DIRECTORY, tempfile.mkdtemp(prefix="gpu-admission-metrics-"))
