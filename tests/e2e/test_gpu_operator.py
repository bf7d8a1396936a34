"""Installed beside NVIDIA's GPU Operator: its node agents (device plugin, GPU Feature Discovery,
dcgm-exporter, MIG manager) get their pods untouched under the shipped configuration, while the
same pod spec in a tenant's namespace is denied for its device access."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def test_a_tenants_configmap_or_secret_naming_the_devices_is_refused_where_envfrom_would_take_it(
    operator: Kubectl,
):
    operator.run("create", "namespace", "tenant-env")
    for kind in ("configmap", "secret generic"):
        args = ["create", *kind.split(), "devices", "-n", "tenant-env", "--from-literal=NVIDIA_VISIBLE_DEVICES=all"]
        result = operator.run(*args, check=False)
        assert result.code != 0, result.stdout
        assert "validate-env-sources.gpu-admission.io" in result.stderr
        assert "key NVIDIA_VISIBLE_DEVICES grants GPU devices" in result.stderr
    # A legacy CUDA image's variable: a GPU-less container taking it by envFrom gets every GPU.
    legacy = operator.run(
        "create", "configmap", "cuda", "-n", "tenant-env", "--from-literal=CUDA_VERSION=12.4.1", check=False
    )
    assert legacy.code != 0 and "key CUDA_VERSION: CUDA_VERSION without NVIDIA_REQUIRE_CUDA" in legacy.stderr
    operator.run(
        "create", "configmap", "cuda", "-n", "tenant-env", "--from-literal=CUDA_VERSION=12.4.1",
        "--from-literal=NVIDIA_REQUIRE_CUDA=cuda>=12.4",
    )  # fmt: skip
    operator.run("create", "configmap", "app", "-n", "tenant-env", "--from-literal=NVIDIA_VISIBLE_DEVICES=void")
    operator.run("create", "secret", "generic", "app", "-n", "tenant-env", "--from-literal=TOKEN=all")


@pytest.mark.parametrize(
    "prefix, admitted",
    [(None, True), ("APP_", True), ("NVIDIA_", False)],
    ids=["no-prefix", "an-ordinary-prefix", "a-prefix-of-the-device-variables"],
)
def test_a_pod_without_a_gpu_may_take_envfrom_unless_its_prefix_could_spell_the_devices(
    operator: Kubectl, prefix: str | None, admitted: bool
):
    operator.run("create", "namespace", "tenant-envfrom", check=False)
    source: dict[str, Any] = {"secretRef": {"name": "app", "optional": True}}
    if prefix is not None:
        source["prefix"] = prefix
    name = f"envfrom-{(prefix or 'none').rstrip('_').lower()}"
    container = {"name": "main", "image": "busybox", "envFrom": [source]}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "tenant-envfrom"}}
    pod["spec"] = {"containers": [container]}
    result = operator.create(json.dumps(pod), check=False)
    assert (result.code == 0) is admitted, result.stderr
    if not admitted:
        assert "envFrom prefix 'NVIDIA_' could spell NVIDIA_VISIBLE_DEVICES" in result.stderr
