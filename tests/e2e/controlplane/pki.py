"""The control plane's own TLS material, made with `cryptography` for one test session: a CA, the
API server's serving certificate (127.0.0.1, localhost), an admin client certificate in
`system:masters` (as envtest does) and the service-account signing key."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    # "EC PRIVATE KEY": the form --service-account-key-file reads a public key from (not PKCS#8).
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )


def _name(common_name: str, organization: str = "") -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


@dataclass(frozen=True)
class Files:
    ca: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path


def make(directory: Path) -> Files:
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    later = now + dt.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("gpu-admission e2e control plane CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(name: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(later)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        certificate = builder.sign(ca_key, hashes.SHA256())
        return certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key)

    serving = leaf(
        _name("kube-apiserver"),
        ExtendedKeyUsageOID.SERVER_AUTH,
        [
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
        ],
    )
    admin = leaf(_name("e2e-admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH, [])
    files = Files(
        ca=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        service_account_key=directory / "service-account.key",
    )
    directory.mkdir(parents=True, exist_ok=True)
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.serving_cert.write_bytes(serving[0])
    files.serving_key.write_bytes(serving[1])
    files.admin_cert.write_bytes(admin[0])
    files.admin_key.write_bytes(admin[1])
    files.service_account_key.write_bytes(_key_pem(ec.generate_private_key(ec.SECP256R1())))
    for path in (files.serving_key, files.admin_key, files.service_account_key):
        path.chmod(0o600)
    return files
