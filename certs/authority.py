"""A CA and a serving certificate for the webhook, made with `cryptography`.

ECDSA P-256 by default. The serving certificate's SANs cover every name the API server may use
for the Service (`S`, `S.N`, `S.N.svc`, `S.N.svc.cluster.local`) plus any extra DNS names or IPs.
Time comes in as an argument.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY = dt.timedelta(days=3650)
SERVING_VALIDITY = dt.timedelta(days=365)
BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class Pair:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


def service_names(service: str, namespace: str) -> list[str]:
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def serving_names(service: str, namespace: str, extra: Sequence[str] = ()) -> list[str]:
    """The Service's names, then extra names (DNS names or IP addresses) of a webhook reached by
    `clientConfig.url`, whose host the certificate must name too."""
    names = service_names(service, namespace)
    return names + [name for name in extra if name not in names]


def split_names(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """DNS names and IP addresses, for the two kinds of subject alternative name."""
    dns: list[str] = []
    ips: list[str] = []
    for name in names:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            dns.append(name)
        else:
            ips.append(name)
    return dns, ips


def covers(certificate: x509.Certificate, names: Sequence[str]) -> bool:
    """Whether the certificate names every one of `names` (a name added later is a reason to renew)."""
    try:
        sans = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return not names
    dns, ips = split_names(names)
    return set(dns) <= set(sans.get_values_for_type(x509.DNSName)) and {ipaddress.ip_address(ip) for ip in ips} <= set(
        sans.get_values_for_type(x509.IPAddress)
    )


def make_ca(now: dt.datetime, common_name: str = "gpu-admission CA", validity: dt.timedelta = CA_VALIDITY) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Pair(certificate, key)


def make_serving(
    ca: Pair, now: dt.datetime, dns_names: list[str], ips: Sequence[str] = (), validity: dt.timedelta = SERVING_VALIDITY
) -> Pair:
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    names = x509.SubjectAlternativeName(alt_names)
    return _leaf(ca, now, dns_names[0], validity, ExtendedKeyUsageOID.SERVER_AUTH, names)


def make_client(
    ca: Pair,
    now: dt.datetime,
    common_name: str,
    validity: dt.timedelta = SERVING_VALIDITY,
    organization: str = "",
) -> Pair:
    """A client certificate (client-auth key usage): what the API server presents to a webhook
    that requires one (an AdmissionConfiguration's kubeConfigFile names it). The organization is
    the group Kubernetes reads from it (`system:masters` for an administrator)."""
    return _leaf(ca, now, common_name, validity, ExtendedKeyUsageOID.CLIENT_AUTH, organization=organization)


def _leaf(
    ca: Pair,
    now: dt.datetime,
    common_name: str,
    validity: dt.timedelta,
    usage: x509.ObjectIdentifier,
    names: x509.SubjectAlternativeName | None = None,
    organization: str = "",
) -> Pair:
    """A certificate `ca` signs for one use (server or client auth), never outliving the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        subject.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + validity, ca.certificate.not_valid_after_utc))
    )
    if names is not None:
        builder = builder.add_extension(names, critical=False)
    certificate = (
        builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return Pair(certificate, key)
