"""The e2e suite's harness, outside pytest so benchmarks use it too: the nodes, the installation
(overlay applied, replicas under the ServiceAccount's token), polling, and manifests."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.balancer import Balancer
from tests.e2e.controlplane.cluster import ControlPlane, free_port
from tests.e2e.install import NAMESPACE, Replica, overlay, service_account_kubeconfig
from tests.e2e.kubectl import Kubectl, Result
from tools.compile_engine import ROOT

HERE = Path(__file__).resolve().parent


def register_nodes(kubectl: Kubectl, manifest: str = "nodes.yaml") -> list[str]:
    """Node objects as NVIDIA's stack (or a cloud provider) leaves them; capacity and Ready
    through the status subresource. Returns their names."""
    nodes = yaml.safe_load((HERE / "manifests" / manifest).read_text())["items"]
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
    return [node["metadata"]["name"] for node in nodes]


# -- the installation ---------------------------------------------------------------------------------


@dataclass
class Installation:
    kubectl: Kubectl
    control_plane: ControlPlane
    port: int
    workdir: Path
    replicas: list[Replica] = field(default_factory=list)
    before_ready: dict[str, Result] = field(default_factory=dict)
    while_starting: list[Result] = field(default_factory=list)  # GPU pod dry runs as the first replica starts

    def replica(self, name: str, port: int | None = None, **env: str) -> Replica:
        """A replica process started afresh; one of the same name before it is stopped and stands
        down (they share a log file: its reviews would be read twice)."""
        for old in [r for r in self.replicas if r.name == name]:
            old.stop()
            self.replicas.remove(old)
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


# A policy load has no API event: a policy is in force once a dry run shows what it does.
def wait_rewritten(kubectl: Kubectl, probe: str, what: str) -> None:
    """Until a dry run of `probe` comes back rewritten into a 1g.10gb slice."""
    wait_for(lambda: "mig-1g.10gb" in kubectl.create(probe, "--dry-run=server", "-o", "json", check=False).stdout, what)


def wait_refused(kubectl: Kubectl, probe: str, what: str) -> None:
    """Until a dry run of `probe` is refused."""
    wait_for(lambda: kubectl.create(probe, "--dry-run=server", check=False).code != 0, what)


def ca_bundle_injected(kubectl: Kubectl) -> bool:
    hooks = kubectl.get("mutatingwebhookconfiguration", "gpu-admission")["webhooks"]
    hooks += kubectl.get("validatingwebhookconfiguration", "gpu-admission")["webhooks"]
    return all(h["clientConfig"].get("caBundle") for h in hooks)


def install(kubectl: Kubectl, control_plane: ControlPlane, workdir: Path) -> Installation:
    """`kubectl apply -k` of the e2e overlay, then what pods get before a replica is ready, then
    replica gpu-admission-0 started and waited for (ready, caBundle injected)."""
    port = free_port()
    kubectl.run("apply", "-k", str(overlay(workdir / "overlay", port)))
    installed = Installation(kubectl, control_plane, port, workdir)
    # Between `kubectl apply` and the first ready replica: what pods get (the README says it).
    kubectl.run("create", "namespace", "install-order")
    installed.before_ready["plain"] = kubectl.create(pod("plain", "install-order"), check=False)
    installed.before_ready["gpu"] = kubectl.create(pod("gpu", "install-order", gpus=1), check=False)
    # From the moment the replica starts until it is ready, GPU pods keep arriving (dry runs): the
    # answers they get are what a user meets in the window (never a TLS verification error).
    started = threading.Event()
    probe = pod("probe", "install-order", gpus=1)

    def keep_asking() -> None:
        while not started.is_set():
            installed.while_starting.append(kubectl.create(probe, "--dry-run=server", check=False))
            started.wait(0.2)

    asking = threading.Thread(target=keep_asking, name="install-probe", daemon=True)
    asking.start()
    replica = installed.replica("gpu-admission-0")
    try:
        replica.wait_ready()
        wait_for(lambda: ca_bundle_injected(kubectl), "the caBundle injected into both webhook configurations")
    except BaseException:
        replica.stop()
        raise
    finally:
        started.set()
        asking.join(30)
    return installed


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


def replicas_behind_balancer(
    installation: Installation, compiled: Path | None = None, **env: str
) -> tuple[list[Replica], Balancer]:
    """Three replicas (gpu-admission-1..3, `env` set) behind one balancer on the installation's
    webhook port, which replica-0 must have left; each waited for (all stopped if one never is).
    `compiled`: a tree of the engine compiled by mypyc (tools/compile_engine.py) that the first
    replica imports before the source, as the image runs it; the others run the source."""
    first = {"PYTHONPATH": os.pathsep.join([str(compiled), str(ROOT)])} if compiled else {}
    replicas = [
        installation.replica(f"gpu-admission-{i}", port=free_port(), **(first if i == 1 else {}), **env)
        for i in (1, 2, 3)
    ]
    balancer = Balancer(installation.port, [r.port for r in replicas])
    try:
        for replica in replicas:
            replica.wait_ready()
    except BaseException:
        for replica in replicas:
            replica.stop()
        balancer.stop()
        raise
    return replicas, balancer


def failure_policy(kubectl: Kubectl, policy: str) -> dict[str, Any]:
    """Both webhook configurations with every webhook's failurePolicy set to `policy`; returns
    the configurations as they were (`restore` puts them back)."""
    before = {}
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        config = kubectl.get(kind, "gpu-admission")
        before[kind] = json.loads(json.dumps(config))
        for hook in config["webhooks"]:
            hook["failurePolicy"] = policy
        kubectl.run("replace", "-f", "-", stdin=json.dumps(config))
    return before


def restore(kubectl: Kubectl, configurations: dict[str, Any]) -> None:
    for config in configurations.values():
        config["metadata"].pop("resourceVersion", None)
        kubectl.run("replace", "-f", "-", stdin=json.dumps(config))
