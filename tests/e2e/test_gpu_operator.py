"""Installed beside NVIDIA's GPU Operator: its node agents (device plugin, GPU Feature Discovery,
dcgm-exporter, MIG manager) get their pods untouched under the shipped configuration, while the
same pod spec in a tenant's namespace is denied for its device access."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.e2e.harness import Installation, wait_for
from tests.e2e.kubectl import Kubectl

DAEMONSETS = yaml.safe_load((Path(__file__).parent / "manifests" / "gpu-operator.yaml").read_text())["items"]
RUNTIME_CLASS = {
    "apiVersion": "node.k8s.io/v1",
    "kind": "RuntimeClass",
    "metadata": {"name": "nvidia"},
    "handler": "nvidia",
}


@pytest.fixture(scope="module")
def operator(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", "gpu-operator")
    kubectl.apply(json.dumps(RUNTIME_CLASS))
    kubectl.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": DAEMONSETS}))
    return kubectl


def gpu_nodes(kubectl: Kubectl, selector: dict[str, str]) -> int:
    labels = ",".join(f"{k}={v}" for k, v in selector.items())
    return len(kubectl.get("nodes", "-l", labels)["items"])


@pytest.mark.parametrize("daemonset", DAEMONSETS, ids=[d["metadata"]["name"] for d in DAEMONSETS])
def test_nvidias_node_agents_get_every_pod_untouched(operator: Kubectl, daemonset):
    name = daemonset["metadata"]["name"]
    wanted = gpu_nodes(operator, daemonset["spec"]["template"]["spec"]["nodeSelector"])
    assert wanted >= 1
    pods = wait_for(
        lambda: (
            (found := operator.get("pods", "-n", "gpu-operator", "-l", f"app={name}")["items"])
            and len(found) == wanted
            and found
        ),
        f"{wanted} pods of {name}",
    )
    template = daemonset["spec"]["template"]["spec"]["containers"][0]
    for stored in pods:
        assert "gpu-admission.io/mutated" not in (stored["metadata"].get("annotations") or {})
        container = stored["spec"]["containers"][0]
        assert container["env"] == template["env"]
        assert container.get("resources", {}) == {}
    events = operator.get("events", "-n", "gpu-operator")["items"]
    assert not [e for e in events if e.get("reason") == "FailedCreate"], [e["message"] for e in events]


def test_the_same_pod_spec_in_a_tenants_namespace_is_denied_for_its_device_access(operator: Kubectl):
    operator.run("create", "namespace", "tenant-agents")
    plugin = DAEMONSETS[0]["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fake-plugin", "namespace": "tenant-agents"},
        "spec": plugin["spec"],
    }
    result = operator.create(json.dumps(pod), check=False)
    assert result.code != 0
    assert "gpu-admission.io" in result.stderr and "denied the request" in result.stderr
    assert "NVIDIA_VISIBLE_DEVICES" in result.stderr
