"""The certificate material of a self-managed webhook, as it sits in its two Secrets, and what each
rotation step does to it. Time comes in as an argument; no I/O.

`gpu-admission-ca` (Opaque): `ca.crt`, `ca.key` (the current CA), `next-ca.crt`, `next-ca.key`
(published beside it during a rollover), `retired-ca.crt` (kept in the bundle after a switch),
and annotations with when the next CA was published and the old one retired.
`gpu-admission-tls` (Opaque): `tls.crt`, `tls.key` and `ca.crt`, the bundle the API server must
trust (every CA in play), which is also what the webhook configurations' `caBundle` carries.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, replace

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from certs.authority import CA_VALIDITY, SERVING_VALIDITY, Pair, make_ca, make_serving, split_names
from certs.rotation import Action, CertState, Validity

CA_CERT, CA_KEY, NEXT_CERT, NEXT_KEY, RETIRED_CERT = "ca.crt", "ca.key", "next-ca.crt", "next-ca.key", "retired-ca.crt"
TLS_CERT, TLS_KEY, BUNDLE = "tls.crt", "tls.key", "ca.crt"
PUBLISHED = "gpu-admission.io/next-ca-published"
RETIRED_AT = "gpu-admission.io/ca-retired-at"


@dataclass(frozen=True)
class Material:
    ca: Pair | None = None
    serving: Pair | None = None
    next_ca: Pair | None = None
    next_published: dt.datetime | None = None
    retired_ca: x509.Certificate | None = None
    retired_at: dt.datetime | None = None

    def state(self) -> CertState:
        return CertState(
            current_ca=_validity(self.ca.certificate) if self.ca else None,
            serving=_validity(self.serving.certificate) if self.serving else None,
            serving_from_current_ca=self.ca is not None
            and self.serving is not None
            and _issued_by(self.serving.certificate, self.ca.certificate),
            next_ca=_validity(self.next_ca.certificate) if self.next_ca else None,
            next_ca_published=self.next_published,
            retired_ca=_validity(self.retired_ca) if self.retired_ca else None,
            retired_at=self.retired_at,
        )

    def bundle(self) -> bytes:
        """Every CA the API server must trust now: current, then next or retired."""
        found = (self.ca.certificate if self.ca else None, self.next_ca.certificate if self.next_ca else None)
        certificates = [c for c in (*found, self.retired_ca) if c is not None]
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)

    def ca_secret(self) -> tuple[dict[str, bytes], dict[str, str]]:
        data: dict[str, bytes] = {}
        annotations: dict[str, str] = {}
        if self.ca:
            data[CA_CERT], data[CA_KEY] = self.ca.cert_pem(), self.ca.key_pem()
        if self.next_ca:
            data[NEXT_CERT], data[NEXT_KEY] = self.next_ca.cert_pem(), self.next_ca.key_pem()
        if self.next_published:
            annotations[PUBLISHED] = _stamp(self.next_published)
        if self.retired_ca:
            data[RETIRED_CERT] = self.retired_ca.public_bytes(serialization.Encoding.PEM)
        if self.retired_at:
            annotations[RETIRED_AT] = _stamp(self.retired_at)
        return data, annotations

    def tls_secret(self) -> dict[str, bytes]:
        if self.serving is None:
            return {}
        return {TLS_CERT: self.serving.cert_pem(), TLS_KEY: self.serving.key_pem(), BUNDLE: self.bundle()}


def read(ca_data: Mapping[str, bytes], annotations: Mapping[str, str], tls_data: Mapping[str, bytes]) -> Material:
    """The material in the Secrets; anything missing or unreadable is None (and so redone)."""
    return Material(
        ca=_pair(ca_data.get(CA_CERT), ca_data.get(CA_KEY)),
        serving=_pair(tls_data.get(TLS_CERT), tls_data.get(TLS_KEY)),
        next_ca=_pair(ca_data.get(NEXT_CERT), ca_data.get(NEXT_KEY)),
        next_published=_time(annotations.get(PUBLISHED)),
        retired_ca=_certificate(ca_data.get(RETIRED_CERT)),
        retired_at=_time(annotations.get(RETIRED_AT)),
    )


def step(
    material: Material,
    action: Action,
    now: dt.datetime,
    names: list[str],
    ca_validity: dt.timedelta = CA_VALIDITY,
    serving_validity: dt.timedelta = SERVING_VALIDITY,
) -> Material:
    """The material after one rotation step (new keys where the step makes a certificate); `names`
    are the serving certificate's DNS names and IP addresses."""
    dns_names, ips = split_names(names)
    if action is Action.BOOTSTRAP:
        ca = make_ca(now, _ca_name(now), validity=ca_validity)
        return Material(ca=ca, serving=make_serving(ca, now, dns_names, ips, validity=serving_validity))
    if action is Action.NOTHING:
        return material
    assert material.ca is not None
    if action is Action.RENEW_SERVING:
        return replace(material, serving=make_serving(material.ca, now, dns_names, ips, validity=serving_validity))
    if action is Action.ADD_NEXT_CA:
        return replace(material, next_ca=make_ca(now, _ca_name(now), validity=ca_validity), next_published=now)
    if action is Action.SWITCH_TO_NEXT_CA:
        assert material.next_ca is not None
        serving = make_serving(material.next_ca, now, dns_names, ips, validity=serving_validity)
        return Material(ca=material.next_ca, serving=serving, retired_ca=material.ca.certificate, retired_at=now)
    return replace(material, retired_ca=None, retired_at=None)  # DROP_RETIRED_CA


def _ca_name(now: dt.datetime) -> str:
    # Current and next CA are trusted side by side: distinct subjects keep chain building plain.
    return f"gpu-admission CA {now.astimezone(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"


def _validity(certificate: x509.Certificate) -> Validity:
    return Validity(certificate.not_valid_before_utc, certificate.not_valid_after_utc)


def _issued_by(certificate: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _certificate(pem: bytes | None) -> x509.Certificate | None:
    if not pem:
        return None
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


def _pair(cert_pem: bytes | None, key_pem: bytes | None) -> Pair | None:
    certificate = _certificate(cert_pem)
    if certificate is None or not key_pem:
        return None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != certificate.public_key():
        return None
    return Pair(certificate, key)


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None
