"""gpu-admission installed as a user would: `kubectl apply -k` of an overlay of deploy/base whose
only change is each webhook's clientConfig (a url on loopback: there is no kube-proxy), and the
server run as `gpu-admission serve --watch-configmaps ... --manage-certs` under its
ServiceAccount's own token (TokenRequest), so the real RBAC authorizer judges every request."""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.e2e.controlplane.cluster import ControlPlane, loopback_env
from tests.e2e.kubectl import Kubectl

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "base"
NAMESPACE = "gpu-admission"
GPU_ADMISSION = Path(sys.executable).parent / "gpu-admission"
# What the server logs when the API server refuses it a request (RBAC): none may appear.
FORBIDDEN = re.compile(r"\b403\b|Forbidden", re.IGNORECASE)


def overlay(directory: Path, port: int) -> Path:
    """The e2e overlay: deploy/base with each webhook served on 127.0.0.1:port, as a user's overlay
    does it with deploy/components/external-webhook and one ConfigMap naming the host."""
    directory.mkdir(parents=True, exist_ok=True)
    host = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpu-admission-webhook-url", "annotations": {"config.kubernetes.io/local-config": "true"}},
        "data": {"host": f"127.0.0.1:{port}"},
    }
    (directory / "webhook-url.yaml").write_text(yaml.safe_dump(host))
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(BASE, directory), "webhook-url.yaml"],
        # The webhook outside the cluster (there is no kube-proxy); a cluster without Kyverno: the
        # PolicyReport CRDs come from the component; and the DeviceClasses that serve
        # nvidia.com/mig-<profile> through DRA (docs/mig-backends.md).
        "components": [
            os.path.relpath(BASE.parent / "components" / name, directory)
            for name in ("external-webhook", "policyreport-crds", "mig-deviceclasses")
        ],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return directory


@dataclass
class Replica:
    """One `gpu-admission serve` process: a replica of the Deployment, outside any pod."""

    name: str
    port: int
    workdir: Path
    kubeconfig: Path
    env_extra: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def start(self) -> None:
        env = loopback_env() | {
            "KUBECONFIG": str(self.kubeconfig),
            "POD_NAME": self.name,
            "GPU_ADMISSION_CERT_SYNC_SECONDS": "2",
            "GPU_ADMISSION_LOG_LEVEL": "DEBUG",  # every review, for the reinvocation case
            "GPU_ADMISSION_AUDIT_SECONDS": "5",  # the background audit, often enough for a test to see
            **self.env_extra,
        }
        command = [
            str(GPU_ADMISSION),
            "serve",
            "--watch-configmaps",
            NAMESPACE,
            "--manage-certs",
            "--serving-name",
            "127.0.0.1",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--cert-dir",
            str(self.workdir / f"{self.name}-certs"),
            "--threads",
            "16",
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)

    def ready(self) -> bool:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # readiness only; the API server verifies the real chain
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}/readyz", timeout=2, context=context) as r:
                return r.status == 200
        except OSError:
            return False

    def wait_ready(self, seconds: float = 150) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"replica {self.name} exited:\n{self.log_text()[-4000:]}")
            if self.ready():
                return
            time.sleep(0.25)
        raise AssertionError(f"replica {self.name} not ready within {seconds:.0f} s:\n{self.log_text()[-4000:]}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def reviews(self) -> list[dict[str, object]]:
        """The server's review log lines (JSON), every review at DEBUG."""
        entries = []
        for line in self.log_text().splitlines():
            if line.startswith("{") and '"message":"review"' in line:
                entries.append(json.loads(line))
        return entries

    def forbidden_lines(self) -> list[str]:
        return [line for line in self.log_text().splitlines() if FORBIDDEN.search(line) and '"review"' not in line]


def service_account_kubeconfig(kubectl: Kubectl, control_plane: ControlPlane, path: Path) -> Path:
    """A kubeconfig holding the gpu-admission ServiceAccount's own token (TokenRequest)."""
    token = kubectl.run("create", "token", "gpu-admission", "-n", NAMESPACE, "--duration=24h").stdout.strip()
    assert control_plane.files is not None
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "e2e",
                        "cluster": {"server": control_plane.url, "certificate-authority": str(control_plane.files.ca)},
                    }
                ],
                "users": [{"name": "gpu-admission", "user": {"token": token}}],
                "contexts": [{"name": "gpu-admission", "context": {"cluster": "e2e", "user": "gpu-admission"}}],
                "current-context": "gpu-admission",
            }
        )
    )
    return path
