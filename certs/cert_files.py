"""Certificate files on disk: ca.crt, tls.crt, tls.key (keys 0600), written atomically."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path

from certs.authority import Pair, make_ca, make_client, make_serving, service_names

CA_FILE, CERT_FILE, KEY_FILE, CA_KEY_FILE = "ca.crt", "tls.crt", "tls.key", "ca.key"
CLIENT_CA_FILE, CLIENT_CERT_FILE, CLIENT_KEY_FILE = "client-ca.crt", "client.crt", "client.key"


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


def write_pair(directory: Path, ca: Pair, serving: Pair) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(directory / CA_FILE, ca.cert_pem(), 0o644)
    write_atomically(directory / CA_KEY_FILE, ca.key_pem(), 0o600)
    # Key before certificate: a reader that sees the new certificate finds its key already there.
    write_atomically(directory / KEY_FILE, serving.key_pem(), 0o600)
    write_atomically(directory / CERT_FILE, serving.cert_pem(), 0o644)


def generate(
    directory: Path, service: str, namespace: str, extra_names: Sequence[str] = (), ips: Sequence[str] = ()
) -> None:
    now = dt.datetime.now(dt.UTC)
    ca = make_ca(now)
    serving = make_serving(ca, now, [*service_names(service, namespace), *extra_names], list(ips))
    write_pair(directory, ca, serving)


def ensure_dev_certificates(directory: Path) -> bool:
    """Dev certificates for localhost on first start; True when new ones were made."""
    if (directory / CERT_FILE).exists() and (directory / KEY_FILE).exists() and (directory / CA_FILE).exists():
        return False
    generate(directory, "gpu-admission", "gpu-admission", ["localhost"], ["127.0.0.1", "::1"])
    return True


def generate_client(directory: Path, name: str) -> None:
    """A client CA (`client-ca.crt`: what `serve --client-ca` trusts) and a client certificate
    signed by it (`client.crt`, `client.key`: what the API server presents)."""
    now = dt.datetime.now(dt.UTC)
    ca = make_ca(now, "gpu-admission client CA")
    client = make_client(ca, now, name)
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(directory / CLIENT_CA_FILE, ca.cert_pem(), 0o644)
    write_atomically(directory / "client-ca.key", ca.key_pem(), 0o600)
    write_atomically(directory / CLIENT_KEY_FILE, client.key_pem(), 0o600)
    write_atomically(directory / CLIENT_CERT_FILE, client.cert_pem(), 0o644)
