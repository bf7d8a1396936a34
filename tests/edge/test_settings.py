"""One frozen settings object (#43): every variable the process reads from its environment is parsed
and checked once, in webhook/environment.py, and read from the object everywhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from webhook.environment import ServerConfig

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_MODULE = ROOT / "webhook" / "environment.py"


def environment_reads(path: Path) -> list[int]:
    """Lines of `path` that touch the process environment: os.environ, os.getenv, os.putenv."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in ("environ", "getenv", "putenv", "environb")
        )
        or (isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name == "environ" for a in node.names))
    ]


def test_no_module_of_the_product_reads_the_environment_but_the_settings_module():
    found = {
        str(path.relative_to(ROOT)): lines
        for package in ("webhook", "certs", "policies")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != SETTINGS_MODULE and (lines := environment_reads(path))
    }
    assert found == {}, f"read the environment through webhook.environment, not here: {found}"
    assert environment_reads(SETTINGS_MODULE), "the settings module is where it is read"


def test_every_setting_is_parsed_into_the_object():
    config = ServerConfig.from_env(
        {
            "GPU_ADMISSION_POLICIES": "/a:/b",
            "GPU_ADMISSION_FAIL_OPEN": "true",
            "GPU_ADMISSION_WATCH_NAMESPACE": "gpu-admission",
            "GPU_ADMISSION_ALL_NAMESPACES": "true",
            "GPU_ADMISSION_LABELLED_NAMESPACES": "false",
            "GPU_ADMISSION_MANAGE_CERTS": "true",
            "GPU_ADMISSION_SERVICE": "svc",
            "GPU_ADMISSION_SERVING_NAMES": "a.example, 10.0.0.1",
            "GPU_ADMISSION_CERT": "/c/tls.crt",
            "GPU_ADMISSION_KEY": "/k/tls.key",
            "GPU_ADMISSION_CLIENT_CA": "/ca.crt",
            "GPU_ADMISSION_BIND": "0.0.0.0:9443",
            "GPU_ADMISSION_THREADS": "8",
            "GPU_ADMISSION_CONNECTIONS": "64",
            "GPU_ADMISSION_READ_TIMEOUT": "2.5",
            "GPU_ADMISSION_CERT_SYNC_SECONDS": "10",
            "GPU_ADMISSION_AUDIT_SECONDS": "0",
            "GPU_ADMISSION_METRICS_BIND": "0.0.0.0:9090",
            "GPU_ADMISSION_LOG_LEVEL": "debug",
            "GPU_ADMISSION_STRICT_SHARES": "0",
            "POD_NAME": "gpu-admission-0",
        }
    )
    assert config == ServerConfig(
        policy_dirs=(Path("/a"), Path("/b")),
        fail_open=True,
        watch_namespace="gpu-admission",
        all_namespaces=True,
        labelled_namespaces=False,
        manage_certs=True,
        service="svc",
        serving_names=("a.example", "10.0.0.1"),
        cert=Path("/c/tls.crt"),
        key=Path("/k/tls.key"),
        client_ca=Path("/ca.crt"),
        bind="0.0.0.0:9443",
        threads=8,
        connections=64,
        read_timeout=2.5,
        cert_sync_seconds=10.0,
        audit_seconds=0.0,
        metrics_bind="0.0.0.0:9090",
        log_level="DEBUG",
        strict_shares=False,
        replica="gpu-admission-0",
    )
    assert config.cert_dir == Path("/c") and config.replica_name == "gpu-admission-0"


def test_the_container_defaults():
    config = ServerConfig.from_env({})
    assert (config.bind, config.threads, config.connections, config.read_timeout) == ("0.0.0.0:8443", 32, 512, 5.0)
    assert config.cert == Path("/etc/gpu-admission/certs/tls.crt") and config.strict_shares


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("GPU_ADMISSION_STRICT_SHARES", "off", "is not 0 or 1"),
        ("GPU_ADMISSION_CONNECTIONS", "0", "is not a positive whole number"),
        ("GPU_ADMISSION_MANAGE_CERTS", "yes", "is not true or false"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(capsys, name, value, says):
    with pytest.raises(SystemExit) as stop:
        ServerConfig.from_env({name: value})
    assert stop.value.code == 2
    assert capsys.readouterr().err == f"error: {name}={value!r} {says}\n"
