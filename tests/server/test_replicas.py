"""Replicas as the Deployment runs them: each its own process (the container's gunicorn command),
all sharing one in-process API server. One view per replica (its watch streams counted from the
API server's side), quotas exact across replicas by default, dry-run writing nothing, and the
certificate Lease kept by the replica that bootstrapped it."""

from __future__ import annotations

import base64
import concurrent.futures
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs.cert_files import ensure_dev_certificates
from tests.support.builders import child_pythonpath, policy
from tests.support.cluster import STREAMS, namespace
from tests.support.kube_fake import FakeKube
from tests.support.processes import SERVICE_NAME, free_port
from tests.support.reviews import review
from webhook.cluster.quota.leases.lease_entries import parse_lease

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NS = "gpu-admission"
LIMITED = policy(
    "five-pods",  # no consistency written: the default must be exact
    "match: {namespaces: [team-a]}\nquota: {limits: {pods: 5}}",
)


class Replica:
    """One server process as the Deployment starts it, named like its pod."""

    def __init__(self, kube: FakeKube, tmp: Path, name: str, certs: Path, hostname: str = "localhost", **env: str):
        self.name, self.port, self.ca, self.hostname = name, free_port(), certs / "ca.crt", hostname
        environment = {
            **os.environ,
            "PYTHONPATH": child_pythonpath(str(ROOT)),
            "KUBECONFIG": str(kube.kubeconfig(tmp / f"{name}.kubeconfig")),
            "GPU_ADMISSION_BIND": f"127.0.0.1:{self.port}",
            "GPU_ADMISSION_CERT": str(certs / "tls.crt"),
            "GPU_ADMISSION_KEY": str(certs / "tls.key"),
            "GPU_ADMISSION_WATCH_NAMESPACE": NS,
            "POD_NAME": name,
            "PROMETHEUS_MULTIPROC_DIR": str(tmp / f"{name}.metrics"),
            # The leader's background audit writes PolicyReports on its own schedule (tests/edge/test_audit.py);
            # here every write must come from admission.
            "GPU_ADMISSION_AUDIT_SECONDS": "0",
            **env,
        }
        environment.pop("KUBERNETES_SERVICE_HOST", None)
        (tmp / f"{name}.metrics").mkdir()
        command = [sys.executable, "-m", "gunicorn", "-c", "python:webhook.serving.gunicorn_conf", "webhook.wsgi:app"]
        self.log = (tmp / f"{name}.log").open("wb")
        self.process = subprocess.Popen(command, cwd=tmp, env=environment, stdout=self.log, stderr=self.log)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        connection = NamedConnection(self.port, _context(self.ca), self.hostname)
        try:
            data = json.dumps(body).encode() if body is not None else None
            connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            payload = response.read()
            try:
                return response.status, json.loads(payload)
            except ValueError:
                return response.status, payload.decode()
        finally:
            connection.close()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, Path(self.log.name).read_text()[-3000:]
            try:
                if self.call("GET", "/readyz")[0] == 200:
                    return
            except (OSError, ssl.SSLError, ValueError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not ready: {Path(self.log.name).read_text()[-3000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def _context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


class NamedConnection(http.client.HTTPSConnection):
    """To 127.0.0.1, checking the certificate for `hostname` (the Service's name, as the API
    server does, where certificates are managed in the cluster)."""

    def __init__(self, port: int, context: ssl.SSLContext, hostname: str) -> None:
        super().__init__("127.0.0.1", port, context=context, timeout=10)
        self.hostname = hostname

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.hostname)  # type: ignore[attr-defined]


@pytest.fixture
def launch(kube: FakeKube, tmp_path: Path) -> Iterator[Any]:
    started: list[Replica] = []
    certs = tmp_path / "certs"
    ensure_dev_certificates(certs)

    def start(count: int, **env: str) -> list[Replica]:
        replicas = [Replica(kube, tmp_path, f"gpu-admission-{len(started) + i}", certs, **env) for i in range(count)]
        started.extend(replicas)
        for replica in replicas:
            replica.wait_ready()
        return replicas

    yield start
    for replica in started:
        replica.stop()


def slice_pod(i: int) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    metadata = {"name": f"p{i}", "namespace": "team-a", "uid": f"uid-p{i}"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "c", "image": "cuda", "resources": resources}]},
    }


def test_each_replica_keeps_one_set_of_watch_streams_whatever_it_serves(kube, launch):
    kube.put(NS, "limits", {"l.yaml": LIMITED})
    replicas = launch(3)
    reviews = [(replica, review(slice_pod(n), uid=f"u{n}", dry_run=True)) for replica in replicas for n in range(64)]
    with concurrent.futures.ThreadPoolExecutor(48) as pool:  # busy: every replica's threads serving at once
        assert {status for status, _ in pool.map(lambda r: r[0].call("POST", "/validate", r[1]), reviews)} == {200}
    assert kube.wait_for(lambda: len(kube.open_watches) == 3 * len(STREAMS), timeout=10)
    for replica in replicas:
        streams = {resource: n for (agent, resource), n in kube.open_watches.items() if f"({replica.name})" in agent}
        assert streams == dict.fromkeys(STREAMS, 1), replica.name
        lists = kube.requests_by(f"({replica.name})", "list", "pods")
        assert len(lists) == 1, f"{replica.name} listed pods {len(lists)} times"


def test_a_worker_count_other_than_one_is_refused_with_the_reason(kube, tmp_path):
    certs = tmp_path / "certs"
    ensure_dev_certificates(certs)
    replica = Replica(kube, tmp_path, "gpu-admission-w", certs, GUNICORN_CMD_ARGS="--workers 2")
    try:
        assert replica.process.wait(30) != 0
        assert "one worker per replica, not 2" in Path(replica.log.name).read_text()
    finally:
        replica.stop()


def test_a_thousand_concurrent_creates_over_three_replicas_admit_exactly_the_limit(kube, launch):
    kube.put(NS, "limits", {"l.yaml": LIMITED})
    kube.store("namespaces", namespace("team-a"))  # as the API server has it before any pod in it
    replicas = launch(3)

    def create(i: int) -> tuple[bool, float, str]:
        started = time.monotonic()
        status, answer = replicas[i % 3].call("POST", "/validate?timeout=3s", review(slice_pod(i), uid=f"r{i}"))
        assert status == 200, answer
        response = answer["response"]
        if response["allowed"]:
            # As the API server does: an admitted pod is stored. A reservation whose pod never
            # appears is released as forged after 5 s, and this test may take longer than that.
            kube.put_pod(slice_pod(i))
        return response["allowed"], time.monotonic() - started, (response.get("status") or {}).get("message", "")

    with concurrent.futures.ThreadPoolExecutor(96) as pool:
        results = list(pool.map(create, range(1000)))
    admitted = [r for r in results if r[0]]
    assert len(admitted) == 5, [r[2] for r in results if not r[0]][:3]
    assert max(seconds for _, seconds, _ in results) < 3.0  # inside the webhook's timeoutSeconds
    assert all(
        "pods 5 + 1 exceeds 5" in message or "contended" in message for allowed, _, message in results if not allowed
    )
    ledgers = [lease for lease in kube.items("leases") if lease["metadata"]["name"].startswith("gpu-admission-quota-")]
    (ledger,) = ledgers
    assert len(parse_lease(ledger).entries) == 5


def test_dry_run_over_every_replica_writes_nothing_and_reserves_nothing(kube, launch):
    kube.put(NS, "limits", {"l.yaml": LIMITED})
    replicas = launch(2)
    writes = len(kube.writes)
    for i in range(40):
        status, answer = replicas[i % 2].call("POST", "/validate", review(slice_pod(i), uid=f"d{i}", dry_run=True))
        assert status == 200 and answer["response"]["allowed"]
    written = [w for w in kube.writes[writes:] if w[1] != "leases" or w[2].startswith("gpu-admission-quota-")]
    assert written == []
    status, answer = replicas[0].call("POST", "/validate", review(slice_pod(99), uid="real"))
    assert answer["response"]["allowed"]  # nothing of the 40 dry runs was held


def test_an_emptied_ca_bundle_is_mended_by_the_replica_that_bootstrapped_the_certificates(kube, tmp_path):
    for name in ("gpu-admission-ca", "gpu-admission-tls"):
        kube.store("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}})
    for configuration in yaml.safe_load_all((ROOT / "deploy/base/webhooks.yaml").read_text()):
        kube.store(configuration["kind"].lower() + "s", configuration)
    certs = tmp_path / "managed"
    replica = Replica(
        kube,
        tmp_path,
        "gpu-admission-c",
        certs,
        SERVICE_NAME,
        GPU_ADMISSION_MANAGE_CERTS="true",
        GPU_ADMISSION_CERT_SYNC_SECONDS="5",
    )
    try:
        replica.wait_ready()
        configuration = kube.get("validatingwebhookconfigurations", "", "gpu-admission")
        wanted = configuration["webhooks"][0]["clientConfig"]["caBundle"]
        for hook in configuration["webhooks"]:
            hook["clientConfig"].pop("caBundle")  # a manifest re-applied
        kube.store("validatingwebhookconfigurations", configuration)
        emptied = time.monotonic()

        def mended() -> bool:
            hooks = kube.objects[("validatingwebhookconfigurations", "", "gpu-admission")]["webhooks"]
            return all(hook["clientConfig"].get("caBundle") == wanted for hook in hooks)

        assert kube.wait_for(mended, timeout=30)
        assert time.monotonic() - emptied < 12  # a 60 s Lease held by the bootstrap would have kept it
        holders = {json.dumps(kube.get("leases", NS, "gpu-admission-certs")["spec"]["holderIdentity"])}
        assert holders == {'"gpu-admission-c"'}
        assert base64.b64decode(wanted) == (certs / "ca.crt").read_bytes()
    finally:
        replica.stop()
    assert kube.get("leases", NS, "gpu-admission-certs")["spec"]["holderIdentity"] == ""  # given up on the way out
