"""GKE's GPU nodes beside the default policies: a vLLM Deployment pinned to an L4 pool keeps its
whole GPU and is scheduled there; a pod pinned to an A100 pool gets GKE's own partition, which
the real scheduler binds to the partitioned pool."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.harness import Installation, register_nodes, wait_for
from tests.e2e.kubectl import Kubectl

VLLM = "vllm/vllm-openai:v0.8.5"
NAMESPACE = "gke-ml"  # opted into slices by default: every nvidia.com/gpu: 1 would become 1g.10gb


@pytest.fixture(scope="module")
def gke(installation: Installation) -> Iterator[Kubectl]:
    kubectl = installation.kubectl
    names = register_nodes(kubectl, "cloud-nodes.yaml")
    kubectl.run("create", "namespace", NAMESPACE)
    kubectl.run("label", "namespace", NAMESPACE, "gpu-admission.io/mig=default")
    yield kubectl
    kubectl.run("delete", "namespace", NAMESPACE, "--wait=false")
    kubectl.run("delete", "node", *names)


def spec(node_selector: dict[str, str]) -> dict[str, Any]:
    return {
        "nodeSelector": node_selector,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {"name": "vllm", "image": "vllm/vllm-openai:v0.8.5", "resources": {"limits": {"nvidia.com/gpu": 1}}}
        ],
    }


def bound(kubectl: Kubectl, selector: str) -> list[dict[str, Any]]:
    def all_bound() -> list[dict[str, Any]] | None:
        pods = kubectl.get("pods", "-n", NAMESPACE, "-l", selector)["items"]
        return pods if pods and all(p["spec"].get("nodeName") for p in pods) else None

    return wait_for(all_bound, f"pods {selector} bound")


def test_a_vllm_deployment_pinned_to_l4_keeps_its_gpu_and_runs_on_the_l4_pool(gke: Kubectl):
    pinned = spec({"cloud.google.com/gke-accelerator": "nvidia-l4"})
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm-l4", "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "vllm-l4"}},
            "template": {"metadata": {"labels": {"app": "vllm-l4"}}, "spec": pinned},
        },
    }
    gke.apply(json.dumps(deployment))
    (stored,) = bound(gke, "app=vllm-l4")
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "affinity" not in stored["spec"]
    assert stored["spec"]["nodeName"] == "gke-l4"
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": NAMESPACE}, "spec": pinned}
    said = gke.create(json.dumps(probe), "--dry-run=server", check=False).stderr
    assert "not turned into a MIG slice: it is pinned to nvidia-l4 (cloud.google.com/gke-accelerator)" in said


def test_a_pod_pinned_to_a_gke_a100_pool_gets_a_gke_partition_and_lands_on_the_split_pool(gke: Kubectl):
    pinned = spec({"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"})
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "a100", "namespace": NAMESPACE, "labels": {"app": "a100"}},
    }
    gke.create(json.dumps({**raw, "spec": pinned}))
    (stored,) = bound(gke, "app=a100")
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert stored["spec"]["nodeSelector"]["cloud.google.com/gke-gpu-partition-size"] == "1g.10gb"
    assert stored["spec"]["nodeName"] == "gke-a100-1g10"
