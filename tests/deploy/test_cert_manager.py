"""Self-managed certificates in a cluster, through the real kubernetes client against an
in-process API server: bootstrap into the Secrets the manifests ship empty, caBundle injection,
one renewing replica at a time (a Lease), files the server picks up without restart, and a
whole rotation with both CAs in the bundle while it rolls over."""

from __future__ import annotations

import base64
import datetime as dt
import socket
import ssl
import threading
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509 import verification
from kubernetes import client

from certs.manager import CertManager
from certs.rotation import Action, RotationPolicy
from tests.support.kube_fake import FakeKube
from webhook.serving.tls import ReloadingContext

NS, SERVICE = "gpu-admission", "gpu-admission"
ROOT = Path(__file__).resolve().parents[2]
START = dt.datetime.now(dt.UTC).replace(microsecond=0)


class Clock:
    """A replica's wall clock (`skew` ahead of true time) and its monotonic clock."""

    def __init__(self, skew: dt.timedelta = dt.timedelta(0)) -> None:
        self.now = START
        self.skew = skew

    def __call__(self) -> dt.datetime:
        return self.now + self.skew

    def monotonic(self) -> float:
        return (self.now - START).total_seconds()


@pytest.fixture
def kube(kube):
    fake = kube
    for name in ("gpu-admission-ca", "gpu-admission-tls"):  # as deploy/base ships them: empty
        fake.store(
            "secrets",
            {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": name, "namespace": NS}},
        )
    # The webhook configurations exactly as deploy/base ships them, without a caBundle.
    for configuration in yaml.safe_load_all((ROOT / "deploy/base/webhooks.yaml").read_text()):
        fake.store(configuration["kind"].lower() + "s", configuration)
    return fake


def manager(kube: FakeKube, directory: Path, identity: str, clock: Clock, **options) -> CertManager:
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{kube.port}"))
    return CertManager(api, NS, SERVICE, identity, directory, clock=clock, monotonic=clock.monotonic, **options)


def secret_data(kube: FakeKube, name: str) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in (kube.get("secrets", NS, name).get("data") or {}).items()}


def bundles(kube: FakeKube) -> set[bytes]:
    found = set()
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for hook in kube.get(kind, "", "gpu-admission")["webhooks"]:
            found.add(base64.b64decode(hook["clientConfig"].get("caBundle", "")))
    return found


def handshake(directory: Path, context: ReloadingContext, verify: bool = True) -> x509.Certificate:
    """A real TLS handshake: the client trusts only the bundle and checks the Service's name
    (`verify=False` for simulated future times, which OpenSSL cannot be told about)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        with context.get().wrap_socket(connection, server_side=True) as tls:
            tls.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    trusting = ssl.create_default_context(cafile=str(directory / "ca.crt"))
    if not verify:
        trusting.check_hostname, trusting.verify_mode = False, ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", port))
    with trusting.wrap_socket(raw, server_hostname=f"{SERVICE}.{NS}.svc") as tls:
        served = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
        tls.send(b"x")
    thread.join(5)
    listener.close()
    return served


def verifier(cas: list[x509.Certificate], now: dt.datetime) -> verification.ServerVerifier:
    builder = verification.PolicyBuilder().store(verification.Store(cas)).time(now)
    return builder.build_server_verifier(verification.DNSName(f"{SERVICE}.{NS}.svc"))


def test_the_first_replica_bootstraps_the_secrets_injects_the_bundle_and_writes_the_files(kube, tmp_path):
    clock = Clock()
    assert manager(kube, tmp_path, "replica-a", clock).sync() is Action.BOOTSTRAP
    ca, tls = secret_data(kube, "gpu-admission-ca"), secret_data(kube, "gpu-admission-tls")
    assert set(ca) == {"ca.crt", "ca.key"} and set(tls) == {"tls.crt", "tls.key", "ca.crt"}
    assert bundles(kube) == {ca["ca.crt"]}
    assert (tmp_path / "tls.crt").read_bytes() == tls["tls.crt"] and (
        tmp_path / "tls.key"
    ).stat().st_mode & 0o777 == 0o600
    served = handshake(tmp_path, ReloadingContext(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")))
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert names == [SERVICE, f"{SERVICE}.{NS}", f"{SERVICE}.{NS}.svc", f"{SERVICE}.{NS}.svc.cluster.local"]


def test_a_webhook_reached_by_url_gets_its_host_in_the_certificate_and_a_name_added_later_renews_it(kube, tmp_path):
    clock = Clock()
    assert manager(kube, tmp_path, "a", clock, extra_names=("127.0.0.1",)).sync() is Action.BOOTSTRAP
    first = x509.load_pem_x509_certificate(secret_data(kube, "gpu-admission-tls")["tls.crt"])
    sans = first.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert manager(kube, tmp_path, "a", clock, extra_names=("127.0.0.1",)).sync() is Action.NOTHING
    widened = manager(kube, tmp_path, "a", clock, extra_names=("127.0.0.1", "webhook.example.test"))
    assert widened.sync() is Action.RENEW_SERVING
    renewed = x509.load_pem_x509_certificate(secret_data(kube, "gpu-admission-tls")["tls.crt"])
    sans = renewed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "webhook.example.test" in sans.get_values_for_type(x509.DNSName)


def test_only_the_lease_holder_renews_and_the_others_serve_what_it_wrote(kube, tmp_path):
    clock = Clock()
    leader, follower = manager(kube, tmp_path / "a", "a", clock), manager(kube, tmp_path / "b", "b", clock)
    assert leader.sync() is Action.BOOTSTRAP
    writes = len(kube.writes)
    assert follower.sync() is Action.NOTHING
    assert not [w for w in kube.writes[writes:] if w[1] in ("secrets", "leases")]
    assert (tmp_path / "b" / "tls.crt").read_bytes() == (tmp_path / "a" / "tls.crt").read_bytes()
    assert kube.get("leases", NS, "gpu-admission-certs")["spec"]["holderIdentity"] == "a"


def test_a_replica_takes_over_once_the_leader_stops_renewing_its_lease(kube, tmp_path):
    clock = Clock()
    leader, follower = manager(kube, tmp_path / "a", "a", clock), manager(kube, tmp_path / "b", "b", clock)
    leader.sync()
    follower.sync()  # sees a's claim: its own clock starts
    clock.now += dt.timedelta(seconds=59)
    follower.sync()
    assert kube.get("leases", NS, "gpu-admission-certs")["spec"]["holderIdentity"] == "a"
    clock.now += dt.timedelta(seconds=2)
    follower.sync()
    assert kube.get("leases", NS, "gpu-admission-certs")["spec"]["holderIdentity"] == "b"
    assert leader.sync() is Action.NOTHING  # the old leader is a follower now


def test_a_replica_whose_clock_runs_fast_never_takes_a_lease_its_holder_keeps_renewing(kube, tmp_path):
    """Expiry is judged by when this replica saw the Lease change, not by the holder's renewTime
    against the local clock: 45 s fast, b would have taken the Lease 15 s after each renewal."""
    clock, fast = Clock(), Clock(skew=dt.timedelta(seconds=45))
    leader = manager(kube, tmp_path / "a", "a", clock)
    follower = manager(kube, tmp_path / "b", "b", fast)
    for second in range(0, 300, 5):
        clock.now = fast.now = START + dt.timedelta(seconds=second)
        if second % 30 == 0:
            leader.sync()
        follower.sync()
        assert kube.get("leases", NS, "gpu-admission-certs")["spec"]["holderIdentity"] == "a", second


def test_a_replica_on_its_way_out_gives_the_lease_up_and_the_next_takes_it_at_once(kube, tmp_path):
    clock = Clock()
    leader, follower = manager(kube, tmp_path / "a", "a", clock), manager(kube, tmp_path / "b", "b", clock)
    stop = threading.Event()
    stop.set()  # run() makes its one pass, then stops
    leader.run(stop)
    assert kube.get("leases", NS, "gpu-admission-certs")["spec"]["holderIdentity"] == ""
    follower.sync()
    assert kube.get("leases", NS, "gpu-admission-certs")["spec"]["holderIdentity"] == "b"


def test_a_bundle_emptied_by_a_manifest_reapply_is_injected_again(kube, tmp_path):
    clock = Clock()
    replica = manager(kube, tmp_path, "a", clock)
    replica.sync()
    configuration = kube.get("mutatingwebhookconfigurations", "", "gpu-admission")
    for hook in configuration["webhooks"]:
        hook["clientConfig"].pop("caBundle")
    kube.store("mutatingwebhookconfigurations", configuration)
    replica.sync()
    assert bundles(kube) == {secret_data(kube, "gpu-admission-ca")["ca.crt"]}


def test_a_whole_rotation_never_serves_a_certificate_outside_a_long_published_bundle(kube, tmp_path):
    """CA 20 days, serving 6 days, next CA 5 days before the end, 13 hours for a bundle to
    propagate; 60 days in 12-hour passes, with the server's reloading context in the loop."""
    clock = Clock()
    policy = RotationPolicy(ca_renew_before=dt.timedelta(days=5), propagation=dt.timedelta(hours=13))
    options = {"policy": policy, "ca_validity": dt.timedelta(days=20), "serving_validity": dt.timedelta(days=6)}
    replica = manager(kube, tmp_path, "a", clock, **options)
    replica.sync()
    context = ReloadingContext(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    published: dict[bytes, dt.datetime] = {}
    steps: list[Action] = []
    sizes: set[int] = set()
    while clock.now < START + dt.timedelta(days=60):
        clock.now += dt.timedelta(hours=12)
        steps.append(replica.sync())
        (bundle,) = bundles(kube)
        cas = x509.load_pem_x509_certificates(bundle)
        sizes.add(len(cas))
        for ca in cas:
            published.setdefault(ca.fingerprint(ca.signature_hash_algorithm), clock.now)
        served = handshake(tmp_path, context, verify=False)
        chain = verifier(cas, clock.now).verify(served, [])  # the API server's check, at this time
        issuer = chain[1]
        issued_for = clock.now - published[issuer.fingerprint(issuer.signature_hash_algorithm)]
        assert issued_for >= policy.propagation or issuer.not_valid_before_utc < START + dt.timedelta(minutes=1)
    assert {Action.RENEW_SERVING, Action.ADD_NEXT_CA, Action.SWITCH_TO_NEXT_CA, Action.DROP_RETIRED_CA} <= set(steps)
    assert context.reloads >= 5 and sizes == {1, 2}  # both CAs in the bundle while it rolls over


def test_ensure_files_waits_for_the_replica_that_makes_them(kube, tmp_path):
    clock = Clock()
    leader, follower = manager(kube, tmp_path / "a", "a", clock), manager(kube, tmp_path / "b", "b", clock)
    leader.lease.try_lead()  # a holds the Lease but has not written anything yet
    waiting = threading.Thread(target=lambda: follower.ensure_files(timeout=10, interval=0.05))
    waiting.start()
    leader.sync()
    waiting.join(15)
    assert (tmp_path / "b" / "tls.crt").exists()


def test_serving_with_managed_certificates_waits_for_them_then_renews_in_the_background(kube, tmp_path, monkeypatch):
    from webhook.replica import ServerConfig, prepare_certificates
    from webhook.serving import background

    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(background, "_starters", [])
    default = client.Configuration.get_default_copy()
    try:
        env = {"GPU_ADMISSION_MANAGE_CERTS": "true", "GPU_ADMISSION_WATCH_NAMESPACE": NS}
        config = ServerConfig.from_env({**env, "GPU_ADMISSION_CERT": str(tmp_path / "certs" / "tls.crt")})
        prepare_certificates(config)
    finally:
        client.Configuration.set_default(default)
    assert all((tmp_path / "certs" / name).exists() for name in ("tls.crt", "tls.key", "ca.crt"))
    assert len(background._starters) == 1  # the renewal thread, started in each worker after fork
    assert bundles(kube) == {secret_data(kube, "gpu-admission-ca")["ca.crt"]}


def test_managed_certificates_need_the_webhooks_namespace(tmp_path):
    from webhook.replica import ServerConfig, prepare_certificates

    with pytest.raises(SystemExit, match="need the webhook's namespace"):
        prepare_certificates(ServerConfig(manage_certs=True, cert=tmp_path / "tls.crt", key=tmp_path / "tls.key"))


def empty_the_bundles(kube: FakeKube) -> None:
    """What `kubectl replace -f deploy/base/webhooks.yaml` does: the configurations without a caBundle."""
    for configuration in yaml.safe_load_all((ROOT / "deploy/base/webhooks.yaml").read_text()):
        current = kube.get(configuration["kind"].lower() + "s", "", configuration["metadata"]["name"])
        configuration["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        kube.store(configuration["kind"].lower() + "s", configuration)


def test_a_replica_is_trusted_only_while_every_webhook_holds_the_ca_of_its_certificate(kube, tmp_path):
    clock = Clock()
    leader = manager(kube, tmp_path / "a", "a", clock)
    assert leader.trusted() is None  # no certificate yet: nothing to tell
    leader.sync()
    assert leader.trusted() is True
    empty_the_bundles(kube)
    assert leader.trusted() is False
    leader.sync()  # the leader's next pass mends it
    assert leader.trusted() is True


def test_a_replica_serves_only_once_the_api_server_trusts_its_certificate(kube, tmp_path):
    clock = Clock()
    leader, follower = manager(kube, tmp_path / "a", "a", clock), manager(kube, tmp_path / "b", "b", clock)
    leader.sync()
    empty_the_bundles(kube)  # a re-applied manifest, before the leader's next pass
    assert follower.ensure_files(timeout=0.2, interval=0.05).startswith("the webhook configurations' caBundle")
    assert (tmp_path / "b" / "tls.crt").exists()  # the files are there: only the trust is missing
    waiting = threading.Thread(target=lambda: follower.ensure_files(timeout=10, interval=0.05))
    waiting.start()
    leader.sync()
    waiting.join(15)
    assert follower.trust is True


def test_readiness_waits_while_the_api_server_would_refuse_the_certificate(monkeypatch):
    from webhook import replica

    class Renewing:
        trust: bool | None = False

    monkeypatch.setattr(replica, "_renewing", [Renewing()])
    assert "caBundle does not hold the CA" in replica.certificate_trusted()
    Renewing.trust = None  # the API server away: the last word stands, and nothing is known against it
    assert replica.certificate_trusted() == ""
    Renewing.trust = True
    assert replica.certificate_trusted() == ""
