"""What a DRA request can reach, held to the real scheduler (the newest release): selectors drawn in
every spelling CEL allows (escapes, either quote kind, raw strings, macros, bindings, quantities,
versions) over devices of every kind NVIDIA's driver publishes, published by hand on a DRA-only
node; whatever the scheduler allocates for a claim lies inside the reach the engine computed, and
where the engine finds no device admitted the scheduler allocates none. Then, through the shipped
webhooks: a claim spelled to look like another driver's is charged the GPUs it reaches, a device a
DeviceTaintRule takes out of service is no free capacity, and a pod is kept off a node whose GPUs
both the device plugin and the DRA driver advertise."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from policies.gpu.catalog import CATALOG
from policies.gpu.device_cel import admits, compile_selector
from policies.gpu.dra_inventory import DraInventory, read_slice
from tests.e2e.harness import Installation, policy_configmap, register_nodes, wait_for
from tests.e2e.kubectl import Kubectl
from tests.support.dra import (
    claim,
    claim_spec,
    device_class,
    exactly,
    profile_class,
    resource_slice,
    slice_device,
)
from tests.support.dra_selectors import DRIVER, UNIVERSE, Term, selector

NODE = "dra-reach"
NAMESPACE = "reach"
TOLERATE = [{"key": "e2e.gpu-admission.io/dra-only", "operator": "Exists", "effect": "NoSchedule"}]
EVERY_DEVICE = device_class("any-device.example.com")  # no selector: every device of every driver


def published() -> list[dict[str, Any]]:
    """The universe's NVIDIA devices on the DRA-only node, in one pool (another driver's device
    beside them would fail most selectors' evaluation there, and so every allocation)."""
    nvidia = [d.published() for d in UNIVERSE if d.driver == DRIVER]
    for i, device in enumerate(nvidia):  # one node's pool: names must differ
        device["name"] = f"d{i}-{device['name']}"
    return [resource_slice(NODE, *nvidia, name=f"{NODE}-nvidia")]


SLICES = published()


def admitted_here(text: str) -> set[str]:
    """The NVIDIA devices of the node the engine evaluates `text` to admit (an error counts as
    admitted: the engine charges more, never less)."""
    inventory = DraInventory()
    made = read_slice(SLICES[0], CATALOG)
    assert made is not None
    inventory.replace_slices({"nvidia": made})
    compiled = compile_selector(text)
    return {d.key[2] for d in inventory.devices() if admits(compiled, d.cel)}


@pytest.fixture(scope="module")
def reach(installation: Installation) -> Iterator[Kubectl]:
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    register_nodes(kubectl, "reach-nodes.yaml")
    kubectl.create(json.dumps(EVERY_DEVICE))
    for made in SLICES:
        kubectl.create(json.dumps(made))
    yield kubectl
    # Nothing of this module steers the later ones: its nodes, devices and class go with it.
    kubectl.run("delete", "namespace", NAMESPACE, "--wait=false", check=False)
    for made in SLICES:
        kubectl.run("delete", "resourceslice", made["metadata"]["name"], check=False)
    kubectl.run("delete", "deviceclass", EVERY_DEVICE["metadata"]["name"], check=False)
    kubectl.run("delete", "node", NODE, "dual-1", check=False)


NAMES = (f"c{i}" for i in itertools.count())


def pod_for(name: str) -> str:
    container = {"name": "main", "image": "cuda", "resources": {"claims": [{"name": "devices"}]}}
    spec = {
        "containers": [container],
        "resourceClaims": [{"name": "devices", "resourceClaimName": name}],
        "tolerations": TOLERATE,
        "nodeSelector": {"kubernetes.io/hostname": NODE},
    }
    return json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
    )


def outcome(kubectl: Kubectl, name: str) -> tuple[list[str]] | None:
    """(the devices the scheduler allocated for claim `name`,), ([],) once it says it cannot; None: not yet."""
    made = kubectl.get("resourceclaim", name, "-n", NAMESPACE)
    allocation = made.get("status", {}).get("allocation")
    if allocation:
        return ([r["device"] for r in allocation["devices"]["results"] if r["driver"] == DRIVER],)
    conditions = kubectl.get("pod", name, "-n", NAMESPACE).get("status", {}).get("conditions") or []
    # Unschedulable, or SchedulerError where a selector's evaluation failed on a device: no allocation.
    refused = any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)
    return ([],) if refused else None


def allocate(kubectl: Kubectl, text: str, count: int | None) -> list[str]:
    name = next(NAMES)
    more = {"allocationMode": "All"} if count is None else {}
    made = claim(name, NAMESPACE, claim_spec(exactly(EVERY_DEVICE["metadata"]["name"], count, text, **more)))
    kubectl.create(json.dumps(made))
    kubectl.create(pod_for(name))
    try:
        return wait_for(lambda: outcome(kubectl, name), f"the scheduler's answer for {text!r}", seconds=90)[0]
    finally:
        kubectl.run("delete", "pod", name, "-n", NAMESPACE, "--force", "--grace-period=0", check=False)
        kubectl.run("delete", "resourceclaim", name, "-n", NAMESPACE, "--wait=true", "--timeout=60s", check=False)


HEX = ("device.driver == 'gpu.nvidi\\x61.com' && device.attributes['gpu.nvidia.com'].type == '\\147pu'", None)


@settings(max_examples=14, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(drawn=selector(), count=st.sampled_from([None, 1]))
@example(drawn=HEX, count=None)
def test_whatever_the_scheduler_allocates_lies_inside_the_reach_computed(reach: Kubectl, drawn: Term, count: Any):
    text, _ = drawn
    ours = admitted_here(text)
    allocated = allocate(reach, text, count)
    assert set(allocated) <= ours, (text, allocated, sorted(ours))
    if not ours:
        assert allocated == [], text  # nothing admitted here: nothing for the scheduler either


QUOTA_NAMESPACE = "reach-quota"
QUOTA_POLICY = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-reach-quota
spec:
  match:
    namespaces: [{QUOTA_NAMESPACE}]
  quota:
    limits:
      gpus: 2
"""


@pytest.mark.parametrize(
    "spelled",
    ["device.driver == 'gpu.nvidi\\x61.com'", "device.attributes[\"gpu.nvidia.com\"].type == '\\147pu'"],
    ids=["hex-escape", "octal-escape"],
)
def test_a_claim_spelled_to_look_like_another_driver_is_refused_for_the_gpus_it_reaches(reach: Kubectl, spelled):
    """The API server stores the selector (it is valid CEL), the scheduler reads NVIDIA's driver in
    it: eight GPUs under a budget of two."""
    reach.run("create", "namespace", QUOTA_NAMESPACE, check=False)
    reach.apply(policy_configmap("e2e-reach-quota", QUOTA_POLICY))
    made = json.dumps(claim("eight", QUOTA_NAMESPACE, claim_spec(exactly("any-device.example.com", 8, spelled))))
    wait_for(lambda: reach.create(made, "--dry-run=server", check=False).code != 0, "the quota policy in force")
    result = reach.create(made, check=False)
    assert result.code != 0
    assert 'admission webhook "validate-claims.gpu-admission.io" denied the request' in result.stderr
    assert "gpus 0 + 8 exceeds 2" in result.stderr and "ResourceClaim reach-quota/eight" in result.stderr


TAINTED_NAMESPACE = "reach-taint"
TAINTED_POLICY = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-reach-taint
spec:
  match:
    namespaces: [{TAINTED_NAMESPACE}]
  mig:
    gpuModels: [A100-40GB]
    allowedProfiles: [7g.40gb]
    defaultProfile: 7g.40gb
"""
SEVEN = next(d["name"] for d in SLICES[0]["spec"]["devices"] if "7g" in str(d["attributes"].get("profile")))
TAINT_RULE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "reach-maintenance"},
    "spec": {
        "deviceSelector": {"driver": DRIVER, "pool": NODE, "device": SEVEN},
        "taint": {"key": "e2e.gpu-admission.io/maintenance", "value": "true", "effect": "NoSchedule"},
    },
}


def gpu_pod(namespace: str, **more: Any) -> str:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    spec = {"containers": [container], "tolerations": TOLERATE, **more}
    return json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": namespace}, "spec": spec}
    )


def test_a_device_a_device_taint_rule_takes_out_of_service_is_no_free_capacity(reach: Kubectl):
    """The only 7g.40gb of the cluster is free: the rewrite serves it by name without a warning.
    Tainted by a DeviceTaintRule (GA in Kubernetes 1.37), it is not: the rewrite warns the pod will
    wait; the rule gone, the warning goes."""
    reach.run("create", "namespace", TAINTED_NAMESPACE, check=False)
    reach.create(json.dumps(profile_class("7g.40gb")))
    reach.apply(policy_configmap("e2e-reach-taint", TAINTED_POLICY))
    probe = gpu_pod(TAINTED_NAMESPACE)
    waiting = "no free 7g.40gb slice in the cluster now"

    def dry_run() -> tuple[dict[str, Any], str]:
        answer = reach.create(probe, "--dry-run=server", "-o", "json")
        return json.loads(answer.stdout)["spec"]["containers"][0]["resources"]["limits"], answer.stderr

    try:
        wait_for(lambda: "nvidia.com/mig-7g.40gb" in dry_run()[0] and waiting not in dry_run()[1], "served, free")
        reach.create(json.dumps(TAINT_RULE))
        wait_for(lambda: waiting in dry_run()[1], "the taint seen")
        reach.run("delete", "devicetaintrule", TAINT_RULE["metadata"]["name"])
        wait_for(lambda: waiting not in dry_run()[1], "the taint gone")
    finally:
        reach.run("delete", "devicetaintrule", TAINT_RULE["metadata"]["name"], check=False)
        reach.run("delete", "deviceclass", profile_class("7g.40gb")["metadata"]["name"], check=False)
        reach.run("delete", "namespace", TAINTED_NAMESPACE, "--wait=false", check=False)


DUAL_NAMESPACE = "reach-dual"
DUAL_POLICY = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-reach-dual
spec:
  match:
    namespaces: [{DUAL_NAMESPACE}]
  mig:
    dualAdvertisedNodes: avoid
"""
DUAL_SLICE = resource_slice("dual-1", slice_device("gpu-0", "NVIDIA H100 80GB HBM3"), name="dual-1-nvidia")


def test_a_pod_is_kept_off_a_node_whose_gpus_the_device_plugin_and_dra_both_advertise(reach: Kubectl):
    """dual-1's device plugin advertises two H100s in allocatable; the DRA driver publishes them
    too: the policy keeps GPU pods off it, and the real scheduler places none there."""
    reach.run("create", "namespace", DUAL_NAMESPACE, check=False)
    reach.create(json.dumps(DUAL_SLICE))
    reach.apply(policy_configmap("e2e-reach-dual", DUAL_POLICY))
    dual_toleration = {"key": "e2e.gpu-admission.io/dual", "operator": "Exists", "effect": "NoSchedule"}
    probe = gpu_pod(DUAL_NAMESPACE, tolerations=[*TOLERATE, dual_toleration])

    def kept_off() -> list[dict[str, Any]] | None:
        answer = json.loads(reach.create(probe, "--dry-run=server", "-o", "json").stdout)
        terms = answer["spec"].get("affinity", {}).get("nodeAffinity", {})
        found = terms.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
        return [e for t in found for e in t["matchExpressions"] if e["key"] == "kubernetes.io/hostname"] or None

    try:
        expressions = wait_for(kept_off, "the policy in force and the node seen twice")
        assert expressions == [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["dual-1"]}]
        reach.create(probe)

        def considered() -> dict[str, Any] | None:
            pod = reach.get("pod", "probe", "-n", DUAL_NAMESPACE)
            conditions = pod.get("status", {}).get("conditions") or []
            return pod if any(c.get("type") == "PodScheduled" for c in conditions) else None

        pod = wait_for(considered, "the scheduler's answer")
        assert pod["spec"].get("nodeName") != "dual-1"
    finally:
        reach.run("delete", "resourceslice", DUAL_SLICE["metadata"]["name"], check=False)
        reach.run("delete", "namespace", DUAL_NAMESPACE, "--wait=false", check=False)
