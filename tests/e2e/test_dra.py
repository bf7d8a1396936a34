"""GPUs held through DRA on the real control plane (the newest release: DRA's gates at their
defaults): DeviceClasses as NVIDIA's driver publishes them and an admin's own, a DRA-only node whose
GPUs are ResourceSlices published by hand, the real scheduler allocating claims and binding pods.
The webhook watches claims, templates and classes under its real RBAC; claims and templates are
judged at their own creation (the shipped webhook configuration sends them); pods are charged what
their claims and class-served extended resources can select."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import Installation, policy_configmap, register_nodes, wait_for
from tests.e2e.kubectl import Kubectl
from tests.support.dra import (
    GPU_CLASS,
    MIG_CLASS,
    claim,
    claim_spec,
    device_class,
    exactly,
    nvidia,
    profile_class,
    resource_slice,
    shareable,
    slice_device,
)

NAMESPACE = "dra-team"
POLICY = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-dra
spec:
  match:
    namespaces: ["dra-*"]
  mig:
    allowedProfiles: [1g.10gb, 2g.20gb]
  quota:
    perPod:
      gpuEquivalents: "1"
"""
MONITORING = "dra-monitoring"
ADMIN_ACCESS = "resource.kubernetes.io/admin-access"
MONITORING_POLICY = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-dra-monitoring
spec:
  match:
    namespaces: [{MONITORING}]
  security:
    allow: [draAdminAccess]
"""
# An admin's class for one model, serving an extended resource of its own (KEP-5004).
H100_CLASS = device_class(
    "h100.example.com", f"device.driver == 'gpu.nvidia.com' && {nvidia('type', 'gpu')}", "example.com/h100"
)
TOLERATE_DRA_NODE = [{"key": "e2e.gpu-admission.io/dra-only", "operator": "Exists", "effect": "NoSchedule"}]


def device(name: str, kind: str, **attributes: str) -> dict[str, Any]:
    values = {"type": kind, "productName": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-e2e-{name}", **attributes}
    memory = "80Gi" if kind == "gpu" else "9856Mi"
    return {
        "name": name,
        "attributes": {key: {"string": value} for key, value in values.items()},
        "capacity": {"memory": {"value": memory}},
    }


SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "dra-h100-gpu.nvidia.com"},
    "spec": {
        "driver": "gpu.nvidia.com",
        "nodeName": "dra-h100",
        "pool": {"name": "dra-h100", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            device("gpu-0", "gpu"),
            device("gpu-1", "gpu"),
            device("gpu-2-mig-1g10gb-0", "mig", profile="1g.10gb", parentUUID="GPU-e2e-gpu-2"),
        ],
    },
}


# A second DRA-only node: an A100-40GB split into two 3g.20gb devices, no device plugin offering
# that profile anywhere in the cluster; NVIDIA's demo-style class serves its device plugin name.
A100_SLICE = resource_slice(
    "dra-a100",
    *(slice_device(f"gpu-0-mig-3g20gb-{i}", "NVIDIA A100-SXM4-40GB", "3g.20gb", "19968Mi") for i in range(2)),
)
CAPACITY_POLICY = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-dra-capacity
spec:
  match:
    namespaces: [capacity-dra]
  mig:
    gpuModels: [H100-80GB, A100-40GB]
"""


def claim_pod(name: str, **claim_ref: str) -> str:
    container: dict[str, Any] = {"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpus"}]}}
    spec = {
        "containers": [container],
        "resourceClaims": [{"name": "gpus", **claim_ref}],
        "tolerations": TOLERATE_DRA_NODE,
    }
    return json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
    )


def extended_pod(name: str, resource: str, amount: int) -> str:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {resource: amount}}}
    spec = {"containers": [container], "tolerations": TOLERATE_DRA_NODE}
    return json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
    )


@pytest.fixture(scope="module")
def dra(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    kubectl.run("create", "namespace", MONITORING)
    register_nodes(kubectl, "dra-nodes.yaml")
    for made in (GPU_CLASS, MIG_CLASS, H100_CLASS, SLICE):
        kubectl.create(json.dumps(made))
    # Made before the policy: a claim no policy judged at its creation is judged when a pod names it.
    kubectl.create(json.dumps(claim("two-gpus", NAMESPACE, claim_spec(exactly("gpu.nvidia.com", 2)), template=True)))
    kubectl.create(json.dumps(claim("one-gpu", NAMESPACE, claim_spec(exactly("gpu.nvidia.com", 1)), template=True)))
    kubectl.apply(policy_configmap("e2e-dra", POLICY))
    kubectl.apply(policy_configmap("e2e-dra-monitoring", MONITORING_POLICY))
    probe = claim_pod("probe", resourceClaimTemplateName="two-gpus")
    # In force once the policy is loaded and the watch has seen the template.
    wait_for(lambda: kubectl.create(probe, "--dry-run=server", check=False).code != 0, "the e2e-dra policy and claims")
    # The label Kubernetes asks before it stores adminAccess claims, where a policy allows them.
    label = ("label", "namespace", MONITORING, f"{ADMIN_ACCESS}=true")
    wait_for(lambda: kubectl.run(*label, check=False).code == 0, "the monitoring namespace labelled")
    return kubectl


def refused(kubectl: Kubectl, manifest: str) -> str:
    result = kubectl.create(manifest, check=False)
    assert result.code != 0, f"admitted: {manifest}"
    assert "denied the request" in result.stderr, result.stderr
    return result.stderr


@pytest.mark.parametrize(
    "claim_ref, refusal",
    [
        ({"resourceClaimTemplateName": "two-gpus"}, "gpuEquivalents 2, over the per-pod cap of 1"),
        ({"resourceClaimName": "not-made-yet"}, "ResourceClaim not-made-yet not found: create it before the pod"),
    ],
    ids=["a-template-of-two-gpus-over-a-cap-of-one", "a-claim-that-does-not-exist"],
)
def test_a_pod_naming_a_claim_is_refused_for_what_the_claim_can_allocate(dra: Kubectl, claim_ref, refusal):
    assert refusal in refused(dra, claim_pod("refused", **claim_ref))


def test_a_pod_whose_claim_fits_is_allocated_by_the_real_scheduler_on_the_dra_only_node(dra: Kubectl):
    dra.create(claim_pod("fits", resourceClaimTemplateName="one-gpu"))
    node = wait_for(lambda: dra.get("pod", "fits", "-n", NAMESPACE)["spec"].get("nodeName"), "the pod bound")
    assert node == "dra-h100"
    statuses = wait_for(
        lambda: dra.get("pod", "fits", "-n", NAMESPACE).get("status", {}).get("resourceClaimStatuses"), "its claim made"
    )
    made = dra.get("resourceclaim", statuses[0]["resourceClaimName"], "-n", NAMESPACE)
    results = wait_for(
        lambda: dra.get("resourceclaim", made["metadata"]["name"], "-n", NAMESPACE).get("status", {}).get("allocation"),
        "the claim allocated",
    )["devices"]["results"]
    assert results[0]["driver"] == "gpu.nvidia.com" and results[0]["device"] in ("gpu-0", "gpu-1")


@pytest.mark.parametrize(
    "spec, refusal",
    [
        pytest.param(
            claim_spec(exactly("mig.nvidia.com", 1, nvidia("profile", "7g.80gb"))),
            "profile 7g.80gb is not allowed (allowed: 1g.10gb, 2g.20gb)",
            id="a-profile-the-policy-does-not-allow",
        ),
        pytest.param(
            claim_spec(exactly("h100.example.com", 4)),
            "a pod naming this claim would hold gpuEquivalents 4, over the per-pod cap of 1",
            id="four-gpus-of-an-admins-class",
        ),
    ],
)
def test_a_claim_is_refused_at_its_own_creation(dra: Kubectl, spec, refusal):
    stderr = refused(dra, json.dumps(claim("hostile", NAMESPACE, spec)))
    assert 'admission webhook "validate-claims.gpu-admission.io" denied the request' in stderr
    assert refusal in stderr and "ResourceClaim dra-team/hostile" in stderr
    assert dra.run("get", "resourceclaim", "hostile", "-n", NAMESPACE, check=False).code != 0


def test_a_claim_within_the_policy_is_stored(dra: Kubectl):
    slice_claim = claim("one-slice", NAMESPACE, claim_spec(exactly("mig.nvidia.com", 1, nvidia("profile", "1g.10gb"))))
    dra.create(json.dumps(slice_claim))
    assert dra.get("resourceclaim", "one-slice", "-n", NAMESPACE)["spec"]["devices"]["requests"][0]["name"] == "r0"


def test_an_extended_resource_an_admins_class_serves_is_charged_what_the_class_selects(dra: Kubectl):
    stderr = refused(dra, extended_pod("two-h100", "example.com/h100", 2))
    assert "gpuEquivalents 2, over the per-pod cap of 1" in stderr
    implicit = extended_pod("implicit", "deviceclass.resource.kubernetes.io/h100.example.com", 2)
    assert "gpuEquivalents 2, over the per-pod cap of 1" in refused(dra, implicit)


def test_one_gpu_by_an_admins_extended_resource_is_admitted_and_its_claim_made_by_the_scheduler(dra: Kubectl):
    """The scheduler makes the pod's claim (KEP-5004) and that create passes the claim webhook."""
    dra.create(extended_pod("one-h100", "example.com/h100", 1))
    node = wait_for(lambda: dra.get("pod", "one-h100", "-n", NAMESPACE)["spec"].get("nodeName"), "the pod bound")
    assert node == "dra-h100"


def test_a_tenant_labelling_its_namespace_for_admin_access_is_refused_and_its_claims_with_it(dra: Kubectl):
    """Kubernetes lets adminAccess claims into a namespace labelled for them, and whoever may
    label the namespace may set the label (kubernetes/kubernetes#141293)."""
    result = dra.run("label", "namespace", NAMESPACE, f"{ADMIN_ACCESS}=true", check=False)
    assert result.code != 0
    assert 'admission webhook "validate-admin-access.gpu-admission.io" denied the request' in result.stderr
    assert "security.draAdminAccess" in result.stderr and "Namespace dra-team" in result.stderr
    admin = json.dumps(claim("watcher", NAMESPACE, claim_spec(exactly("gpu.nvidia.com", 1, adminAccess=True))))
    assert "admin access to devices requires" in dra.create(admin, check=False).stderr


def test_where_a_policy_allows_admin_access_the_label_and_the_claim_are_stored(dra: Kubectl):
    admin = claim("watcher", MONITORING, claim_spec(exactly("gpu.nvidia.com", 1, adminAccess=True)))
    dra.create(json.dumps(admin))
    assert dra.get("namespace", MONITORING)["metadata"]["labels"][ADMIN_ACCESS] == "true"


def test_on_a_dra_only_node_free_slices_steer_the_rewrite_and_the_scheduler_serves_the_slice_by_dra(dra: Kubectl):
    """No device plugin offers 3g.20gb and no GFD label names an A100-40GB: the rewrite sees the
    ResourceSlice's free devices, picks 3g.20gb over the policy's first model, and the scheduler
    serves nvidia.com/mig-3g.20gb from the class that maps it (KEP-5004)."""
    dra.run("create", "namespace", "capacity-dra")
    dra.create(json.dumps(profile_class("3g.20gb")))
    dra.create(json.dumps(A100_SLICE))
    dra.apply(policy_configmap("e2e-dra-capacity", CAPACITY_POLICY))
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    metadata = {"name": "sized", "namespace": "capacity-dra", "annotations": {"gpu-admission.io/gpu-memory": "15Gi"}}
    manifest = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {"containers": [container], "tolerations": TOLERATE_DRA_NODE},
        }
    )

    shown: list[str] = []

    def rewritten() -> dict[str, Any] | None:
        answer = dra.create(manifest, "--dry-run=server", "-o", "json", check=False)
        shown[:] = [answer.stdout or answer.stderr]
        limits = json.loads(answer.stdout)["spec"]["containers"][0]["resources"]["limits"] if answer.code == 0 else {}
        return limits if "nvidia.com/mig-3g.20gb" in limits else None

    try:
        try:
            wait_for(rewritten, "the policy loaded and the slice seen")
        except AssertionError as error:
            raise AssertionError(f"{error}; the last dry run: {shown[-1][:3000]}") from None
        dra.create(manifest)
        node = wait_for(lambda: dra.get("pod", "sized", "-n", "capacity-dra")["spec"].get("nodeName"), "the pod bound")
        assert node == "dra-a100"
    finally:  # the A100-40GB capacity would steer the later modules' rewrites
        dra.run("delete", "namespace", "capacity-dra", "--wait=false", check=False)
        dra.run("delete", "resourceslice", A100_SLICE["metadata"]["name"], check=False)
        dra.run("delete", "deviceclass", profile_class("3g.20gb")["metadata"]["name"], check=False)


SHARING = "shared-claims"
SHARING_POLICY = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-shared-claims
spec:
  match:
    namespaces: [{SHARING}]
  quota:
    limits:
      gpus: 2
"""


def naming(name: str, claim_name: str) -> str:
    """A pod in the sharing namespace naming a ResourceClaim (no toleration: it stays pending)."""
    container = {"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpus"}]}}
    spec = {"containers": [container], "resourceClaims": [{"name": "gpus", "resourceClaimName": claim_name}]}
    metadata = {"name": name, "namespace": SHARING}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})


def gpu_claim(name: str, count: int) -> str:
    return json.dumps(claim(name, SHARING, claim_spec(exactly("gpu.nvidia.com", count))))


def test_a_claim_pods_share_is_charged_once_and_one_made_again_bigger_under_its_pod_is_refused(dra: Kubectl):
    """Two pods naming one 2-GPU claim hold 2 GPUs of a budget of 2, not 4. Then a pod waits on a
    1-GPU claim beside another pod's: that claim deleted and made again for 2 GPUs would carry
    the budget to 3, and its creation is refused, as the budget's message says."""
    dra.run("create", "namespace", SHARING)
    dra.apply(policy_configmap("e2e-shared-claims", SHARING_POLICY))
    dra.create(gpu_claim("shared", 2))
    wait_for(lambda: dra.create(gpu_claim("probe", 3), "--dry-run=server", check=False).code != 0, "the policy")
    dra.create(naming("first", "shared"))
    # The second adds no GPU once the pod watch counts the first (until then the first's
    # reservation holds the claim whole: a moment of charging more, never less).
    wait_for(lambda: dra.create(naming("second", "shared"), "--dry-run=server", check=False).code == 0, "first counted")
    dra.create(naming("second", "shared"))
    dra.run("delete", "pod", "first", "second", "-n", SHARING)

    dra.create(gpu_claim("swap", 1))
    dra.create(gpu_claim("filler", 1))
    dra.create(naming("waiting", "swap"))
    wait_for(lambda: dra.create(naming("beside", "filler"), "--dry-run=server", check=False).code == 0, "room")
    dra.create(naming("beside", "filler"))
    dra.run("delete", "resourceclaim", "swap", "-n", SHARING)
    # Once the watches show it gone, the waiting pod holds nothing, and swap may come back as it was.
    wait_for(lambda: dra.create(gpu_claim("swap", 1), "--dry-run=server", check=False).code == 0, "swap gone")
    stderr = refused(dra, gpu_claim("swap", 2))
    assert 'admission webhook "validate-claims.gpu-admission.io" denied the request' in stderr
    assert "pods here name this claim already, so it adds at once: shared-claims: gpus 1 + 2 exceeds 2" in stderr
    assert "ResourceClaim shared-claims/swap" in stderr
    dra.create(gpu_claim("swap", 1))


SHARES = "shares-dra"
SHARES_POLICY = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-shares
spec:
  match:
    namespaces: [{SHARES}]
  quota:
    perPod:
      gpuEquivalents: "0.2"
"""
# A third pool on the DRA-only node: one 3g.40gb device its driver lets several claims share
# (consumable capacity, Kubernetes 1.36 on), its memory taken in steps of 10Gi.
SHARED_SLICE = resource_slice(
    "dra-h100",
    shareable(
        slice_device("gpu-3-mig-3g40gb-0", "NVIDIA H100 80GB HBM3", "3g.40gb", "40Gi"),
        {"default": "0", "validRange": {"min": "0", "step": "10Gi"}},
    ),
    name="dra-h100-shared",
)
SHARED_SLICE["spec"]["pool"]["name"] = "dra-h100-shared"


def test_a_claim_asking_part_of_a_shared_device_is_charged_its_share_and_allocated(dra: Kubectl):
    """A quarter of a shared 3g.40gb (10Gi of 40Gi) is a quarter of its weight, under a per-pod cap
    of 0.2 GPU-equivalents that the whole slice passes; a claim asking no capacity may reach the
    whole device and is refused at its creation. The real scheduler then allocates the share."""
    dra.run("create", "namespace", SHARES)
    dra.create(json.dumps(profile_class("3g.40gb")))
    dra.create(json.dumps(SHARED_SLICE))
    dra.apply(policy_configmap("e2e-shares", SHARES_POLICY))
    whole_claim = claim("whole", SHARES, claim_spec(exactly("mig-3g-40gb.gpu.nvidia.com", 1)))
    asked = {"capacity": {"requests": {"memory": "10Gi"}}}
    quarter_claim = claim("quarter", SHARES, claim_spec(exactly("mig-3g-40gb.gpu.nvidia.com", 1, **asked)))
    try:
        wait_for(
            lambda: (
                dra.create(json.dumps(quarter_claim), "--dry-run=server", check=False).code == 0
                and dra.create(json.dumps(whole_claim), "--dry-run=server", check=False).code != 0
            ),
            "the policy loaded and the shared device seen",
        )
        stderr = refused(dra, json.dumps(whole_claim))
        assert "a pod naming this claim would hold gpuEquivalents 3/7, over the per-pod cap" in stderr
        dra.create(json.dumps(quarter_claim))
        pod = json.loads(claim_pod("sharing", resourceClaimName="quarter"))
        pod["metadata"]["namespace"] = SHARES
        dra.create(json.dumps(pod))
        results = wait_for(
            lambda: dra.get("resourceclaim", "quarter", "-n", SHARES).get("status", {}).get("allocation"),
            "the share allocated",
        )["devices"]["results"]
        assert results[0]["device"] == "gpu-3-mig-3g40gb-0"
        assert results[0].get("consumedCapacity", {}).get("memory") == "10Gi"
    finally:  # the shared device would steer the later modules' rewrites
        dra.run("delete", "namespace", SHARES, "--wait=false", check=False)
        dra.run("delete", "resourceslice", "dra-h100-shared", check=False)
        dra.run("delete", "deviceclass", profile_class("3g.40gb")["metadata"]["name"], check=False)
