"""The control plane's own TLS material for one test session, made by the project's certificate
code (certs.authority): a CA, the API server's serving certificate (127.0.0.1, localhost), an
admin client certificate in `system:masters` (as envtest does) and the service-account key."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from certs.authority import make_ca, make_client, make_serving

VALIDITY = dt.timedelta(days=2)


@dataclass(frozen=True)
class Files:
    ca: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path


def make(directory: Path) -> Files:
    now = dt.datetime.now(dt.UTC)
    ca = make_ca(now, "gpu-admission e2e control plane CA", VALIDITY)
    serving = make_serving(ca, now, ["localhost", "kubernetes.default.svc"], ["127.0.0.1", "10.0.0.1"], VALIDITY)
    admin = make_client(ca, now, "e2e-admin", VALIDITY, organization="system:masters")
    # "EC PRIVATE KEY": the form --service-account-key-file reads a public key from (not PKCS#8).
    account_key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    files = Files(
        ca=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        service_account_key=directory / "service-account.key",
    )
    directory.mkdir(parents=True, exist_ok=True)
    for path, data in (
        (files.ca, ca.cert_pem()),
        (files.serving_cert, serving.cert_pem()),
        (files.serving_key, serving.key_pem()),
        (files.admin_cert, admin.cert_pem()),
        (files.admin_key, admin.key_pem()),
        (files.service_account_key, account_key),
    ):
        path.write_bytes(data)
        if path.suffix == ".key":
            path.chmod(0o600)
    return files
