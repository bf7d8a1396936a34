"""A gang's shared claim on the real control plane (Kubernetes 1.37 with its beta PodGroup gates
on, as the suite starts it): a PodGroup (scheduling.k8s.io/v1beta1) makes one claim from a
template for all its pods, the real resourceclaim controller makes it once and the real scheduler
allocates it once; the webhook watches PodGroups under its real RBAC and charges the claim once to
the team's budget, before and after the pods are bound, while a pod outside the group naming the
same template gets a claim of its own and is charged it."""

from __future__ import annotations

import json

import pytest

from tests.e2e.harness import Installation, policy_configmap, register_nodes, wait_for
from tests.e2e.kubectl import Kubectl
from tests.support.dra import (
    claim,
    claim_spec,
    device_class,
    exactly,
    group_pod,
    nvidia,
    resource_slice,
    slice_device,
)

NAMESPACE = "gang-team"
POLICY = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-gang
spec:
  match:
    namespaces: [{NAMESPACE}]
  quota:
    limits:
      gpus: 2
"""
GANG_CLASS = device_class("gang.example.com", f"device.driver == 'gpu.nvidia.com' && {nvidia('type', 'gpu')}")
SLICE = resource_slice(
    "gang-h100", *(slice_device(f"gpu-{i}", "NVIDIA H100 80GB HBM3", memory="80Gi") for i in range(4))
)
TOLERATE = [{"key": "e2e.gpu-admission.io/gang-only", "operator": "Exists", "effect": "NoSchedule"}]
GROUP = {
    "apiVersion": "scheduling.k8s.io/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "gang", "namespace": NAMESPACE},
    "spec": {
        "schedulingPolicy": {"basic": {}},
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}],
    },
}


def gang_pod(name: str, group: str | None = "gang") -> str:
    return json.dumps(group_pod(name, group, {"gpus": "two-gpus"}, namespace=NAMESPACE, tolerations=TOLERATE))


@pytest.fixture(scope="module")
def gang(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    register_nodes(kubectl, "gang-nodes.yaml")
    kubectl.create(json.dumps(GANG_CLASS))
    kubectl.create(json.dumps(SLICE))
    template = claim("two-gpus", NAMESPACE, claim_spec(exactly("gang.example.com", 2)), template=True)
    kubectl.create(json.dumps(template))
    kubectl.apply(policy_configmap("e2e-gang", POLICY))
    kubectl.create(json.dumps(GROUP))
    kubectl.create(gang_pod("a"))

    # In force once the policy is loaded and the watches have seen the first pod, the template and
    # the group: a pod outside the gang is refused the budget of 2 the first fills, and a second
    # pod of the gang adds nothing to it.
    def known() -> bool:
        alone = kubectl.create(gang_pod("alone", group=None), "--dry-run=server", check=False)
        return alone.code != 0 and kubectl.create(gang_pod("b"), "--dry-run=server", check=False).code == 0

    wait_for(known, "the policy, the first pod and the PodGroup known")
    return kubectl


def test_the_pods_of_a_gang_are_charged_the_claim_their_group_makes_once(gang: Kubectl):
    for name in ("b", "c"):
        gang.create(gang_pod(name))
    outside = gang.create(gang_pod("alone", group=None), check=False)
    assert outside.code != 0 and "gpus 2 + 2 exceeds 2" in outside.stderr, outside.stderr


def test_the_cluster_makes_and_allocates_one_claim_for_the_gang_and_it_stays_charged_once(gang: Kubectl):
    names = ("a", "b", "c")
    for name in names:
        wait_for(lambda n=name: gang.get("pod", n, "-n", NAMESPACE)["spec"].get("nodeName"), f"pod {name} bound")
    made = {
        wait_for(
            lambda n=name: gang.get("pod", n, "-n", NAMESPACE).get("status", {}).get("resourceClaimStatuses"),
            f"pod {name}'s claim",
        )[0]["resourceClaimName"]
        for name in names
    }
    claims = gang.get("resourceclaims", "-n", NAMESPACE)["items"]
    assert len(made) == 1 and [c["metadata"]["name"] for c in claims] == list(made)
    assert claims[0]["metadata"]["ownerReferences"][0]["kind"] == "PodGroup"
    # Bound and holding the group's claim, the gang is still charged it once.
    assert gang.create(gang_pod("d"), "--dry-run=server", check=False).code == 0
    outside = gang.create(gang_pod("alone", group=None), "--dry-run=server", check=False)
    assert outside.code != 0 and "gpus 2 + 2 exceeds 2" in outside.stderr, outside.stderr
