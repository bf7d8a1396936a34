"""One replica wired together: its policy sources, its view of the cluster, its certificates and
the server (`gpu-admission serve`: the webhook under gunicorn over TLS, on the embedded default
if asked nothing).

The same ServerConfig comes from the command line (`serve`) or from the environment (the WSGI
module a container's gunicorn loads), so both run the same way.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certs.files import CA_FILE, CERT_FILE, KEY_FILE, ensure_dev_certificates
from policies import COMPILED, PolicyProblem
from webhook import logs
from webhook.cluster.api import identity  # imported here: fixes this replica's name in the master, before the fork
from webhook.environment import number
from webhook.serving import background
from webhook.serving.server import WebhookServer
from webhook.sources.directories import DirectoryWatcher
from webhook.sources.files import bundled_texts
from webhook.sources.store import PolicyStore
from webhook.state import EngineHolder, Settings

log = logging.getLogger("gpu_admission.server")
DEFAULT_CERT_DIR = Path(".gpu-admission/certs")


@dataclass(frozen=True)
class ServerConfig:
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
    cert_dir: Path = DEFAULT_CERT_DIR
    client_ca: Path | None = None  # clients must present a certificate this CA signed
    threads: int = 32
    cert_sync_seconds: float = 30.0  # how often certificates, Secrets and caBundle are checked
    metrics_bind: str = ""  # host:port of a plain-HTTP /metrics listener; "": /metrics on the webhook's port

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ServerConfig:
        env = dict(os.environ if env is None else env)
        cert = env.get("GPU_ADMISSION_CERT", "/etc/gpu-admission/certs/tls.crt")
        return cls(
            policy_dirs=tuple(Path(p) for p in env.get("GPU_ADMISSION_POLICIES", "").split(":") if p),
            fail_open=env.get("GPU_ADMISSION_FAIL_OPEN") == "true",
            watch_namespace=env.get("GPU_ADMISSION_WATCH_NAMESPACE", ""),
            all_namespaces=env.get("GPU_ADMISSION_ALL_NAMESPACES") == "true",
            labelled_namespaces=env.get("GPU_ADMISSION_LABELLED_NAMESPACES") == "true",
            manage_certs=env.get("GPU_ADMISSION_MANAGE_CERTS") == "true",
            service=env.get("GPU_ADMISSION_SERVICE", "gpu-admission"),
            serving_names=tuple(n.strip() for n in env.get("GPU_ADMISSION_SERVING_NAMES", "").split(",") if n.strip()),
            cert_dir=Path(cert).parent,
            client_ca=Path(env["GPU_ADMISSION_CLIENT_CA"]) if env.get("GPU_ADMISSION_CLIENT_CA") else None,
            threads=int(number(env, "GPU_ADMISSION_THREADS", "32")),
            cert_sync_seconds=number(env, "GPU_ADMISSION_CERT_SYNC_SECONDS", "30"),
            metrics_bind=env.get("GPU_ADMISSION_METRICS_BIND", ""),
        )


def build_holder(config: ServerConfig) -> EngineHolder:
    """The engine holder and its policy sources: bundled, directories (reloaded) or ConfigMaps (watched)."""
    from webhook.metrics import LOAD_ERRORS

    holder = EngineHolder(Settings(fail_open=config.fail_open, policy_namespace=config.watch_namespace))

    def count(source: str, problems: list[PolicyProblem]) -> None:
        LOAD_ERRORS.inc(len(problems))
        holder.load_errors += len(problems)

    store = PolicyStore(holder.swap, on_result=count)
    if config.watch_namespace:
        background.register(lambda: _watch_cluster(holder, store, config))
    elif config.policy_dirs:
        directories = DirectoryWatcher(list(config.policy_dirs), store)
        holder.sources.append(directories)
        directories.check_once(settle=False)
        background.register(directories.start)
    else:
        store.update("bundled", tuple(bundled_texts()))
    return holder


def _watch_cluster(holder: EngineHolder, store: PolicyStore, config: ServerConfig) -> None:
    from webhook.cluster.wiring import audit_seconds, connect

    identity.load_config()
    connect(
        holder.view,
        store,
        config.watch_namespace,
        all_namespaces=config.all_namespaces,
        labelled_namespaces=config.labelled_namespaces,
        audit_every=audit_seconds(),
    )

    def stopped() -> None:
        for thread in holder.view.background:
            thread.stop()

    background.on_exit(stopped)


def prepare_certificates(config: ServerConfig) -> None:
    """Certificate files before serving: made in the cluster (self-managed: the Secrets, the Lease,
    kept renewed by a thread in the worker) or, outside one, dev certificates on first start."""
    if not config.manage_certs:
        if ensure_dev_certificates(config.cert_dir):
            log.info("dev certificates made", extra={"fields": {"ca": str(config.cert_dir / CA_FILE)}})
        return
    if not config.watch_namespace:
        raise SystemExit("self-managed certificates need the webhook's namespace (--watch-configmaps)")
    identity.load_config()
    missing = _cert_manager(config).ensure_files()
    if missing:
        raise SystemExit(f"not serving after 120 s: {missing}")
    background.register(lambda: _renew_in_background(config))


def _cert_manager(config: ServerConfig) -> Any:
    from certs.manager import CertManager
    from webhook.cluster.api.identity import REPLICA, api_client

    # One identity for the master's bootstrap and the worker's renewals: the worker keeps the
    # Lease the bootstrap took, and mends an emptied caBundle at its first pass.
    return CertManager(
        api_client(),
        config.watch_namespace,
        config.service,
        REPLICA,
        config.cert_dir,
        extra_names=config.serving_names,
    )


_renewing: list[Any] = []  # the worker's CertManager, whose `trust` readiness waits on


def certificate_trusted() -> str:
    """A readiness gate: why the API server would refuse this replica's certificate now ("" if it
    would not), so the Service never sends a review to a replica it cannot verify."""
    from certs.manager import UNTRUSTED

    return UNTRUSTED if _renewing and _renewing[0].trust is False else ""


def _renew_in_background(config: ServerConfig) -> None:
    manager = _cert_manager(config)
    _renewing[:] = [manager]
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop, config.cert_sync_seconds), name="certs", daemon=True)
    thread.start()

    def stopped() -> None:
        stop.set()
        thread.join(10)

    background.on_exit(stopped)


def build_app(config: ServerConfig) -> Any:
    """The Flask app of a replica, and /metrics on its own port where one is configured (started
    with the worker's other background work)."""
    from webhook.metrics import exposition
    from webhook.serving.app import create_app
    from webhook.serving.metrics_port import serve_metrics

    holder = build_holder(config)
    if config.manage_certs:
        holder.gates.append(certificate_trusted)
    if config.metrics_bind:
        stops: list[Callable[[], None]] = []

        def render() -> bytes:
            return exposition(holder.quota_metrics())

        def stop_all() -> None:
            for stop in stops:
                stop()

        background.register(lambda: stops.append(serve_metrics(config.metrics_bind, render)))
        background.on_exit(stop_all)
    return create_app(holder, metrics_here=not config.metrics_bind)


def serve(config: ServerConfig, bind: str) -> None:
    logs.configure(os.environ.get("GPU_ADMISSION_LOG_LEVEL", "INFO"))  # as the WSGI entry point reads it
    prepare_certificates(config)
    app = build_app(config)
    ca = str(config.cert_dir / CA_FILE)
    client_ca = str(config.client_ca) if config.client_ca else None
    fields = {"bind": bind, "ca": ca, "threads": config.threads, "clientCa": client_ca, "engineCompiled": COMPILED}
    log.info("serving", extra={"fields": fields})
    options = {
        "bind": bind,
        "threads": config.threads,
        "certfile": str(config.cert_dir / CERT_FILE),
        "keyfile": str(config.cert_dir / KEY_FILE),
        "ca_certs": client_ca,
    }
    WebhookServer(app, options).run()
