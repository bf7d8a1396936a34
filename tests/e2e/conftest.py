"""One control plane for the whole session, gpu-admission installed into it once.

The control plane is built from Go modules on the first run (cached by version outside the
repository) and started on loopback; if it cannot be built or started here, every e2e test fails
with the reason: CI never skips this suite silently.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane.build import BuildError, ensure_binaries
from tests.e2e.controlplane.cluster import ControlPlane, StartError, free_port
from tests.e2e.install import NAMESPACE, Replica, overlay, service_account_kubeconfig
from tests.e2e.kubectl import Kubectl, Result

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        binaries = ensure_binaries()
    except BuildError as error:
        pytest.fail(f"the e2e control plane cannot be built here: {error}", pytrace=False)
    plane = ControlPlane(binaries, tmp_path_factory.mktemp("control-plane"))
    try:
        plane.start()
    except StartError as error:
        plane.stop()
        pytest.fail(f"the e2e control plane did not start: {error}", pytrace=False)
    try:
        register_nodes(Kubectl(binaries / "kubectl", plane.kubeconfig))
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    return Kubectl(control_plane.bin_dir / "kubectl", control_plane.kubeconfig)


def register_nodes(kubectl: Kubectl) -> None:
    """Node objects as NVIDIA's stack leaves them; capacity and Ready through the status subresource."""
    nodes = yaml.safe_load((HERE / "manifests" / "nodes.yaml").read_text())["items"]
    for node in nodes:
        status = node.pop("status")
        kubectl.create(json.dumps(node))
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e: no kubelet"}
        patch = {
            "status": {"capacity": status["allocatable"], "allocatable": status["allocatable"], "conditions": [ready]}
        }
        kubectl.run(
            "patch", "node", node["metadata"]["name"], "--subresource=status", "--type=merge", "-p", json.dumps(patch)
        )
        # The TaintNodesByCondition admission plugin taints a new node not-ready; the node-lifecycle
        # controller, left out here, would lift it once the node reports Ready.
        kubectl.run("taint", "node", node["metadata"]["name"], "node.kubernetes.io/not-ready:NoSchedule-")


# -- the installation ---------------------------------------------------------------------------------


@dataclass
class Installation:
    kubectl: Kubectl
    control_plane: ControlPlane
    port: int
    workdir: Path
    replicas: list[Replica] = field(default_factory=list)
    before_ready: dict[str, Result] = field(default_factory=dict)

    def replica(self, name: str, port: int | None = None, **env: str) -> Replica:
        kubeconfig = service_account_kubeconfig(self.kubectl, self.control_plane, self.workdir / f"{name}.kubeconfig")
        replica = Replica(name, port or self.port, self.workdir, kubeconfig, env)
        replica.start()
        self.replicas.append(replica)
        return replica


def wait_for(condition: Callable[[], Any], what: str, seconds: float = 60, every: float = 0.25) -> Any:
    """Poll until `condition()` is truthy (the API server offers no event for most of these)."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(every)


def ca_bundle_injected(kubectl: Kubectl) -> bool:
    hooks = kubectl.get("mutatingwebhookconfiguration", "gpu-admission")["webhooks"]
    hooks += kubectl.get("validatingwebhookconfiguration", "gpu-admission")["webhooks"]
    return all(h["clientConfig"].get("caBundle") for h in hooks)


@pytest.fixture(scope="session")
def installation(control_plane: ControlPlane, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory):
    workdir = tmp_path_factory.mktemp("gpu-admission")
    port = free_port()
    kubectl.run("apply", "-k", str(overlay(workdir / "overlay", port)))
    installed = Installation(kubectl, control_plane, port, workdir)
    # Between `kubectl apply` and the first ready replica: what pods get (the README says it).
    kubectl.run("create", "namespace", "install-order")
    installed.before_ready["plain"] = kubectl.create(pod("plain", "install-order"), check=False)
    installed.before_ready["gpu"] = kubectl.create(pod("gpu", "install-order", gpus=1), check=False)
    replica = installed.replica("gpu-admission-0")
    try:
        replica.wait_ready()
        wait_for(lambda: ca_bundle_injected(kubectl), "the caBundle injected into both webhook configurations")
        yield installed
    finally:
        for each in installed.replicas:
            each.stop()
    forbidden = [line for each in installed.replicas for line in each.forbidden_lines()]
    assert not forbidden, "the API server refused gpu-admission a request (RBAC):\n" + "\n".join(forbidden[:20])


# -- manifests ----------------------------------------------------------------------------------------


def pod(
    name: str,
    namespace: str,
    gpus: int | str | None = None,
    resources: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    limits = dict(resources or {})
    if gpus is not None:
        limits["nvidia.com/gpu"] = gpus
    container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"}
    if limits:
        container["resources"] = {"limits": limits}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    if labels:
        metadata["labels"] = labels
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}})


def policy_configmap(name: str, text: str, namespace: str = NAMESPACE) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {"gpu-admission.io/policy": "true"}},
            "data": {f"{name}.yaml": text},
        }
    )
