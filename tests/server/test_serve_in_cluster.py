"""The container's own command line against an in-process API server: gunicorn loading
webhook.wsgi with the deployment's environment, certificates made in the cluster, policies from
ConfigMaps, pods watched, answering over TLS as the API server calls it (Service name checked)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support.builders import child_pythonpath, policy
from tests.support.kube_fake import FakeKube
from tests.support.processes import SERVICE_NAME, free_port
from tests.support.reviews import gpu_pod, review

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NS = "gpu-admission"
QUOTA = policy(
    "team-a",
    "match: {namespaces: [team-a]}\nmig: {gpuModels: [A100-80GB], defaultProfile: 1g.10gb}\nquota: {limits: {pods: 1}}",
)


class ServiceConnection(http.client.HTTPSConnection):
    """Connects to 127.0.0.1 but checks the certificate for the Service's name, as the API server does."""

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=SERVICE_NAME)  # type: ignore[attr-defined]


def call(port: int, bundle: Path, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
    context = ssl.create_default_context(cafile=str(bundle))
    connection = ServiceConnection("127.0.0.1", port, context=context, timeout=10)
    data = json.dumps(body).encode() if body is not None else None
    connection.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    try:
        return response.status, json.loads(payload)
    except ValueError:
        return response.status, payload.decode()


def test_the_container_command_makes_its_certificates_in_the_cluster_and_judges_with_its_state(tmp_path):
    kube = FakeKube()
    kube.start()
    for name in ("gpu-admission-ca", "gpu-admission-tls"):
        kube.store("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}})
    for configuration in yaml.safe_load_all((ROOT / "deploy/base/webhooks.yaml").read_text()):
        kube.store(configuration["kind"].lower() + "s", configuration)
    kube.put(NS, "team-a", {"q.yaml": QUOTA})
    running = gpu_pod({"team": "a"})
    running["metadata"].update(name="running", uid="uid-running")
    running["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    kube.put_pod(running)
    port, certs = free_port(), tmp_path / "certs"
    env = {
        **os.environ,
        "PYTHONPATH": child_pythonpath(str(ROOT)),
        "KUBECONFIG": str(kube.kubeconfig(tmp_path / "kubeconfig")),
        "GPU_ADMISSION_BIND": f"127.0.0.1:{port}",
        "GPU_ADMISSION_WORKERS": "1",
        "GPU_ADMISSION_CERT": str(certs / "tls.crt"),
        "GPU_ADMISSION_KEY": str(certs / "tls.key"),
        "GPU_ADMISSION_MANAGE_CERTS": "true",
        "GPU_ADMISSION_WATCH_NAMESPACE": NS,
        "POD_NAME": "gpu-admission-0",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)
    command = [sys.executable, "-m", "gunicorn", "-c", "python:webhook.serving.gunicorn_conf", "webhook.wsgi:app"]
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        ready, deadline = False, time.monotonic() + 60
        while not ready and time.monotonic() < deadline:
            assert server.poll() is None, server.stderr.read().decode()[-3000:]
            try:
                ready = call(port, certs / "ca.crt", "GET", "/readyz")[0] == 200
            except (OSError, ssl.SSLError):
                time.sleep(0.2)
        assert ready
        # The bundle the API server trusts (caBundle) is the one the server's certificate chains to.
        hook = kube.get("validatingwebhookconfigurations", "", "gpu-admission")["webhooks"][0]
        bundle = tmp_path / "bundle.crt"
        bundle.write_bytes(base64.b64decode(hook["clientConfig"]["caBundle"]))
        status, mutated = call(port, bundle, "POST", "/mutate?timeout=3s", review(gpu_pod({"team": "a"})))
        assert status == 200 and mutated["response"]["patchType"] == "JSONPatch"
        second = gpu_pod({"team": "a"})
        second["metadata"]["uid"] = "uid-second"
        second["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
        status, judged = call(port, bundle, "POST", "/validate?timeout=3s", review(second))
        assert status == 200 and judged["response"]["allowed"] is False
        assert "pods 1 + 1 exceeds 1 (policy team-a)" in judged["response"]["status"]["message"]
    finally:
        server.terminate()
        server.wait(30)
        kube.stop()
