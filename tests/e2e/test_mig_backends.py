"""One GPU request, three back-ends, on the real control plane: the same pod manifest (`nvidia.com/gpu:
1` and `gpu-memory: 15Gi`) created three times lands on a device-plugin node, on a DRA node with a
static MIG split (served by the DeviceClass we ship for its profile: the scheduler makes the pod's
claim) and on a DRA partitionable pool, as the real scheduler decides; a ResourceQuota on the
extended name counts both kinds of node alike; the policy's budget stops the same pods on every
back-end, and deleting one frees its charge. Under `backend: draClaim` the pods get claims from the
ladder templates the replicas published ahead, charged their worst rung until allocated, and ladder
pods fill the GPU."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import Installation, policy_configmap, register_nodes, wait_for
from tests.e2e.kubectl import Kubectl
from tests.support.dra import GPU_CLASS, MIG_CLASS

H100 = "NVIDIA H100 80GB HBM3"
AUTO, LADDERS = "backends", "ladders"
TAINT = "e2e.gpu-admission.io/backends"
RUNTIME = f"""
  runtime:
    tolerations: [{{key: {TAINT}, operator: Exists, effect: NoSchedule}}]
    nodeSelector: {{{TAINT}: "true"}}"""


def gpu_policy(namespace: str, mig: str, limit: str) -> str:
    return f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-{namespace}
spec:
  match:
    namespaces: [{namespace}]
  mig: {{gpuModels: [H100-80GB], allowedProfiles: [1g.20gb, 4g.40gb]{mig}}}{RUNTIME}
  quota:
    limits: {{gpuEquivalents: "{limit}"}}
"""


def mig_device(name: str, profile: str, memory: str, slices: int | None = None) -> dict[str, Any]:
    attributes = {"type": "mig", "profile": profile, "productName": H100, "uuid": f"MIG-e2e-{name}"}
    device: dict[str, Any] = {
        "name": name,
        "attributes": {k: {"string": v} for k, v in attributes.items()},
        "capacity": {"memory": {"value": memory}},
    }
    if slices is not None:
        device["consumesCounters"] = [{"counterSet": "gpu-0", "counters": {"memory": {"value": str(slices)}}}]
    return device


def node_slice(node: str, name: str, count: int, **spec: Any) -> dict[str, Any]:
    pool = {"name": node, "generation": 1, "resourceSliceCount": count}
    body = {"driver": "gpu.nvidia.com", "nodeName": node, "pool": pool, **spec}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}


STATIC = node_slice("be-static", "be-static-gpus", 1, devices=[mig_device("gpu-0-mig-1g20gb-0", "1g.20gb", "20096Mi")])
# Dynamic MIG: one GPU's memory slices shared by every placement the driver advertises (the whole
# GPU, one 1g.20gb, two 4g.40gb); counters and devices in slices of their own, as 1.36 asks.
COUNTERS = node_slice(
    "be-dynamic", "be-dynamic-counters", 2, sharedCounters=[{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}]
)
WHOLE = {
    "name": "gpu-0",
    "attributes": {"type": {"string": "gpu"}, "productName": {"string": H100}, "uuid": {"string": "GPU-e2e-dyn"}},
    "capacity": {"memory": {"value": "80Gi"}},
    "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "8"}}}],
}
DYNAMIC = node_slice(
    "be-dynamic",
    "be-dynamic-devices",
    2,
    devices=[
        WHOLE,
        mig_device("gpu-0-mig-1g20gb-0", "1g.20gb", "20096Mi", 2),
        mig_device("gpu-0-mig-4g40gb-0", "4g.40gb", "40320Mi", 4),
        mig_device("gpu-0-mig-4g40gb-4", "4g.40gb", "40320Mi", 4),
    ],
)
QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "slices", "namespace": AUTO},
    "spec": {"hard": {"requests.nvidia.com/mig-1g.20gb": "3"}},
}


def gpu_pod(name: str, namespace: str = AUTO) -> str:
    """The one manifest of today: a whole GPU, and the memory it needs."""
    metadata = {"name": name, "namespace": namespace, "annotations": {"gpu-admission.io/gpu-memory": "15Gi"}}
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}})


@pytest.fixture(scope="module")
def cluster(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    register_nodes(kubectl, "backend-nodes.yaml")
    for made in (GPU_CLASS, MIG_CLASS, STATIC, COUNTERS, DYNAMIC):
        kubectl.apply(json.dumps(made))
    for namespace in (AUTO, LADDERS):
        kubectl.run("create", "namespace", namespace)
    kubectl.create(json.dumps(QUOTA))
    kubectl.apply(policy_configmap("e2e-backends", gpu_policy(AUTO, "", "1")))
    kubectl.apply(policy_configmap("e2e-ladders", gpu_policy(LADDERS, ", backend: draClaim", "8/7")))
    # In force once a dry run is rewritten by the policy and the slices are seen.
    wait_for(lambda: "nvidia.com/mig-1g.20gb" in dry_run(kubectl, gpu_pod("probe")), "the policies and slices")
    return kubectl


def dry_run(kubectl: Kubectl, manifest: str) -> str:
    answer = kubectl.create(manifest, "--dry-run=server", "-o", "json", check=False)
    return answer.stdout if answer.code == 0 else answer.stderr


def bound(kubectl: Kubectl, name: str, namespace: str = AUTO) -> str:
    return str(wait_for(lambda: kubectl.get("pod", name, "-n", namespace)["spec"].get("nodeName"), f"{name} bound"))


def test_one_manifest_lands_on_every_back_end_as_the_scheduler_decides(cluster: Kubectl):
    nodes = []
    for i in range(3):
        cluster.create(gpu_pod(f"same-{i}"))
        nodes.append(bound(cluster, f"same-{i}"))
    assert sorted(nodes) == ["be-dynamic", "be-plugin", "be-static"]
    for i, node in enumerate(nodes):
        made = cluster.get("pod", f"same-{i}", "-n", AUTO)
        assert made["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.20gb": "1"}
        record = made["metadata"]["annotations"]["gpu-admission.io/mutated"]
        assert "backend auto: device plugin or DRA extended resource" in record
        if node == "be-plugin":
            continue
        # Served by DRA: the scheduler made the pod's claim from our class for the profile (KEP-5004).
        status = wait_for(
            lambda i=i: cluster.get("pod", f"same-{i}", "-n", AUTO)["status"].get("extendedResourceClaimStatus"),
            "the scheduler's claim",
        )
        claim = cluster.get("resourceclaim", status["resourceClaimName"], "-n", AUTO)
        assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "mig-1g.20gb.gpu-admission.io"
    used = wait_for(
        lambda: (
            cluster.get("resourcequota", "slices", "-n", AUTO)["status"]
            .get("used", {})
            .get("requests.nvidia.com/mig-1g.20gb")
            == "3"
        ),
        "the quota to count the three",
    )
    assert used
    named = json.loads(gpu_pod("named"))
    named["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-1g.20gb": 1}
    assert "exceeded quota" in dry_run(cluster, json.dumps(named))


def test_the_budget_holds_on_every_back_end_and_a_deleted_pod_frees_its_charge(cluster: Kubectl):
    # 3/7 held; no 1g.20gb is free anywhere, a 4g.40gb can still be carved from the pool.
    wait_for(lambda: "nvidia.com/mig-4g.40gb" in dry_run(cluster, gpu_pod("bigger")), "the slices seen taken")
    cluster.create(gpu_pod("bigger"))
    assert bound(cluster, "bigger") == "be-dynamic"
    refusal = dry_run(cluster, gpu_pod("over"))
    assert "denied the request" in refusal and "gpuEquivalents 1 + 1/7 exceeds 1" in refusal
    cluster.run("delete", "pod", "bigger", "-n", AUTO, "--grace-period=0", "--force")
    wait_for(lambda: "denied" not in dry_run(cluster, gpu_pod("over")), "the charge freed")


def test_ladder_pods_take_the_first_rung_free_and_are_charged_the_worst_until_allocated(cluster: Kubectl):
    rewritten = json.loads(dry_run(cluster, gpu_pod("ladder-0", LADDERS)))
    (reference,) = rewritten["spec"]["resourceClaims"]
    template = reference["resourceClaimTemplateName"]
    # Published ahead by the replicas; the dry run made nothing.
    wait_for(
        lambda: cluster.run("get", "resourceclaimtemplate", template, "-n", LADDERS, check=False).code == 0,
        "the template",
    )
    assert not cluster.get("resourceclaims", "-n", LADDERS)["items"]
    cluster.create(gpu_pod("ladder-0", LADDERS))
    assert bound(cluster, "ladder-0", LADDERS) == "be-dynamic"
    statuses = cluster.get("pod", "ladder-0", "-n", LADDERS)["status"]["resourceClaimStatuses"]
    allocation = wait_for(
        lambda: cluster.get("resourceclaim", statuses[0]["resourceClaimName"], "-n", LADDERS)["status"].get(
            "allocation"
        ),
        "the claim allocated",
    )
    assert allocation["devices"]["results"][0]["request"] == "gpu/4g-40gb"  # 1g.20gb is taken everywhere
    # The GPU is full now: the next waits, charged its worst rung (4/7), and a third is over 8/7.
    cluster.create(gpu_pod("ladder-1", LADDERS))
    refusal = dry_run(cluster, gpu_pod("ladder-2", LADDERS))
    assert "gpuEquivalents 8/7 + 4/7 exceeds 8/7" in refusal
    assert not cluster.get("pod", "ladder-1", "-n", LADDERS)["spec"].get("nodeName")
