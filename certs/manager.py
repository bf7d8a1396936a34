"""Self-managed certificates in the cluster: the thin I/O around certs.rotation and certs.material.

One pass (`sync`): read the two Secrets; if this replica holds the `gpu-admission-certs` Lease,
take the step the rotation logic asks for, write the Secrets (compare-and-swap on their
resourceVersion) and make both webhook configurations' `caBundle` the bundle of every CA in play;
then, leader or not, write the serving certificate, key and bundle from the Secret to the local
certificate directory, where the server picks them up at the next handshake (no restart).
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from certs.authority import CA_VALIDITY, SERVING_VALIDITY, covers, serving_names
from certs.cert_files import CA_FILE, CERT_FILE, KEY_FILE, write_atomically
from certs.lease import LeaseLock
from certs.material import BUNDLE, TLS_CERT, TLS_KEY, read, step
from certs.rotation import Action, RotationPolicy, next_action

log = logging.getLogger("gpu_admission.certs")
TIMEOUT = (2.0, 5.0)
Clock = Callable[[], dt.datetime]
DEFAULT_POLICY = RotationPolicy()
UNTRUSTED = (
    "the webhook configurations' caBundle does not hold the CA of this replica's certificate yet "
    "(the replica holding the gpu-admission-certs Lease injects it)"
)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class CertManager:
    def __init__(
        self,
        api_client: client.ApiClient | None,
        namespace: str,
        service: str,
        identity: str,
        cert_dir: Path,
        webhook: str = "gpu-admission",
        clock: Clock = _now,
        policy: RotationPolicy = DEFAULT_POLICY,
        lease_duration: dt.timedelta = dt.timedelta(seconds=60),
        monotonic: Callable[[], float] = time.monotonic,
        ca_validity: dt.timedelta = CA_VALIDITY,
        serving_validity: dt.timedelta = SERVING_VALIDITY,
        extra_names: Sequence[str] = (),
    ) -> None:
        # Any: bodies go in and come out as plain JSON, not the client's models.
        self.core: Any = client.CoreV1Api(api_client)
        self.admission: Any = client.AdmissionregistrationV1Api(api_client)
        self.namespace = namespace
        self.names = serving_names(service, namespace, extra_names)
        self.identity = identity
        self.cert_dir = cert_dir
        self.webhook = webhook
        self.clock = clock
        self.policy = policy
        self.validity = (ca_validity, serving_validity)
        self.ca_secret, self.tls_secret = f"{webhook}-ca", f"{webhook}-tls"
        duration = lease_duration.total_seconds()
        self.lease = LeaseLock(api_client, namespace, f"{webhook}-certs", identity, duration, monotonic, clock)
        self.trust: bool | None = None  # as last told by trusted()

    # -- one pass ---------------------------------------------------------------------------------
    def sync(self) -> Action:
        """One pass; returns the step taken (NOTHING when none was due or another replica leads)."""
        ca_secret, tls_secret = self._read_secret(self.ca_secret), self._read_secret(self.tls_secret)
        material = read(_data(ca_secret), _annotations(ca_secret), _data(tls_secret))
        now = self.clock()
        action = next_action(material.state(), now, self.policy)
        renamed = material.ca and material.serving and not covers(material.serving.certificate, self.names)
        if action is Action.NOTHING and renamed:
            action = Action.RENEW_SERVING  # a serving name was added (--serving-name): renewed at once
        taken = Action.NOTHING
        if self.lease.try_lead():
            if action is not Action.NOTHING:
                material = step(material, action, now, self.names, *self.validity)
                data, annotations = material.ca_secret()
                ca_secret = self._write_secret(self.ca_secret, ca_secret, data, annotations)
                tls_secret = self._write_secret(self.tls_secret, tls_secret, material.tls_secret(), {})
                taken = action
                log.info("certificates rotated", extra={"fields": {"step": action.value, "by": self.identity}})
            self._inject(material.bundle())
        self._write_files(_data(tls_secret))
        return taken

    def run(self, stop: threading.Event, interval: float = 30.0) -> None:
        """sync() now and every `interval` seconds until `stop` (then the Lease is given up, so
        another replica takes over at once); a failed pass is logged and retried. After each pass,
        `trust` says whether the API server trusts this replica's certificate (readiness waits on it)."""
        self._guarded_sync()
        self._check_trust()
        while not stop.wait(interval):
            self._guarded_sync()
            self._check_trust()
        self.lease.release()

    def ensure_files(self, timeout: float = 120.0, interval: float = 2.0) -> str:
        """Before serving: sync until the certificate files exist (another replica may be the one
        making them) and the webhook configurations trust them (the leader injects the bundle),
        so no review ever meets a certificate the API server would refuse. "" once they do, else
        what is still missing after `timeout` seconds."""
        stop = threading.Event()
        deadline = time.monotonic() + timeout  # real waiting, whatever clock the rotation reads
        while True:
            self._guarded_sync()
            if not all((self.cert_dir / name).exists() for name in (CERT_FILE, KEY_FILE, CA_FILE)):
                missing = f"no certificates in {self.cert_dir}: see the certificate sync errors above"
            elif self._check_trust() is False:
                missing = UNTRUSTED
            else:
                return ""
            if time.monotonic() >= deadline:
                return missing
            stop.wait(interval)

    def _check_trust(self) -> bool | None:
        found = self.trusted()
        if found is not None:
            if found != self.trust:
                log.info("trusted by the webhook configurations" if found else UNTRUSTED)
            self.trust = found
        return found

    def trusted(self) -> bool | None:
        """Whether every webhook of both configurations (those that exist) trusts this replica's
        serving certificate: its caBundle holds the CA that issued it. None when that cannot be
        told now (the files or the API server away)."""
        try:
            serving = x509.load_pem_x509_certificate((self.cert_dir / CERT_FILE).read_bytes())
        except (OSError, ValueError):
            return None
        for read_config in (
            self.admission.read_mutating_webhook_configuration,
            self.admission.read_validating_webhook_configuration,
        ):
            try:
                configuration = _json(read_config(self.webhook, **_raw()))
            except ApiException as error:
                if error.status == 404:
                    continue  # not installed: the API server calls nothing
                return None
            except Exception:  # refused, reset, timed out
                return None
            for hook in configuration.get("webhooks") or []:
                if not _issued_by_one_of(serving, (hook.get("clientConfig") or {}).get("caBundle") or ""):
                    return False
        return True

    def _guarded_sync(self) -> None:
        try:
            self.sync()
        except Exception as error:  # an API server away, a Secret forbidden: try again next time
            log.warning("certificate sync failed", extra={"fields": {"error": f"{type(error).__name__}: {error}"}})

    # -- Secrets, webhook configurations, files ------------------------------------------------------
    def _read_secret(self, name: str) -> dict[str, Any] | None:
        try:
            return _json(self.core.read_namespaced_secret(name, self.namespace, **_raw()))
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def _write_secret(
        self, name: str, current: dict[str, Any] | None, data: dict[str, bytes], annotations: dict[str, str]
    ) -> dict[str, Any]:
        encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
        metadata = dict((current or {}).get("metadata") or {"name": name, "namespace": self.namespace})
        kept = {k: v for k, v in (metadata.get("annotations") or {}).items() if not k.startswith("gpu-admission.io/")}
        metadata["annotations"] = {**kept, **annotations}
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata, "data": encoded}
        if current is None:
            return _json(self.core.create_namespaced_secret(self.namespace, body, **_raw()))
        return _json(self.core.replace_namespaced_secret(name, self.namespace, body, **_raw()))

    def _inject(self, bundle: bytes) -> None:
        """Every webhook of both configurations trusts the bundle; a configuration already right is
        not written."""
        wanted = base64.b64encode(bundle).decode()
        kinds = (
            (self.admission.read_mutating_webhook_configuration, self.admission.replace_mutating_webhook_configuration),
            (
                self.admission.read_validating_webhook_configuration,
                self.admission.replace_validating_webhook_configuration,
            ),
        )
        for read_config, replace_config in kinds:
            try:
                configuration = _json(read_config(self.webhook, **_raw()))
            except ApiException as error:
                if error.status == 404:
                    continue  # not installed (yet): nothing to inject into
                raise
            hooks = configuration.get("webhooks") or []
            if all((h.get("clientConfig") or {}).get("caBundle") == wanted for h in hooks):
                continue
            for hook in hooks:
                hook.setdefault("clientConfig", {})["caBundle"] = wanted
            replace_config(self.webhook, configuration, **_raw())
            log.info("caBundle injected", extra={"fields": {"configuration": configuration.get("kind")}})

    def _write_files(self, data: dict[str, bytes]) -> None:
        if not all(data.get(key) for key in (TLS_CERT, TLS_KEY, BUNDLE)):
            return
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        # Key before certificate: a reader that sees the new certificate finds its key already there.
        for file, key, mode in ((KEY_FILE, TLS_KEY, 0o600), (CA_FILE, BUNDLE, 0o644), (CERT_FILE, TLS_CERT, 0o644)):
            path = self.cert_dir / file
            if not path.exists() or path.read_bytes() != data[key]:
                write_atomically(path, data[key], mode)


def _issued_by_one_of(certificate: x509.Certificate, bundle: str) -> bool:
    try:
        authorities = x509.load_pem_x509_certificates(base64.b64decode(bundle)) if bundle else []
    except ValueError:
        return False
    for authority in authorities:
        try:
            certificate.verify_directly_issued_by(authority)
            return True
        except (ValueError, TypeError, InvalidSignature):
            continue
    return False


def _raw() -> dict[str, Any]:
    return {"_preload_content": False, "_request_timeout": TIMEOUT}


def _json(response: Any) -> dict[str, Any]:
    return dict(orjson.loads(response.data))


def _data(secret: dict[str, Any] | None) -> dict[str, bytes]:
    return {key: base64.b64decode(value) for key, value in ((secret or {}).get("data") or {}).items()}


def _annotations(secret: dict[str, Any] | None) -> dict[str, str]:
    return dict(((secret or {}).get("metadata") or {}).get("annotations") or {})
