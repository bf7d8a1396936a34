"""GPUs held through DRA: the real API server stores ResourceClaimTemplates and ResourceClaims
(resource.k8s.io/v1), the webhook watches them under its real RBAC, and a pod that names one is
judged for what it can allocate of NVIDIA's GPUs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import Installation, policy_configmap, wait_for
from tests.e2e.kubectl import Kubectl

NAMESPACE = "dra-team"
CAP = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-dra
spec:
  match:
    namespaces: ["dra-*"]
  quota:
    perPod:
      gpuEquivalents: "1"
"""


def template(name: str, count: int) -> str:
    request = {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
    spec = {"spec": {"devices": {"requests": [request]}}}
    metadata = {"name": name, "namespace": NAMESPACE}
    return json.dumps(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": metadata, "spec": spec}
    )


def claim_pod(name: str, **claim: str) -> str:
    container: dict[str, Any] = {"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpus"}]}}
    spec = {"containers": [container], "resourceClaims": [{"name": "gpus", **claim}]}
    return json.dumps(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}
    )


@pytest.fixture(scope="module")
def dra(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    kubectl.apply(policy_configmap("e2e-dra", CAP))
    kubectl.create(template("two-gpus", 2))
    kubectl.create(template("one-gpu", 1))
    probe = claim_pod("probe", resourceClaimTemplateName="two-gpus")
    # In force once the policy is loaded and the watch has seen the template.
    wait_for(lambda: kubectl.create(probe, "--dry-run=server", check=False).code != 0, "the e2e-dra policy and claims")
    return kubectl


@pytest.mark.parametrize(
    "claim, refusal",
    [
        ({"resourceClaimTemplateName": "two-gpus"}, "gpuEquivalents 2, over the per-pod cap of 1"),
        ({"resourceClaimName": "not-made-yet"}, "ResourceClaim not-made-yet not found: create it before the pod"),
    ],
    ids=["a-template-of-two-gpus-over-a-cap-of-one", "a-claim-that-does-not-exist"],
)
def test_a_pod_naming_a_claim_is_refused_for_what_the_claim_can_allocate(dra: Kubectl, claim, refusal):
    result = dra.create(claim_pod("refused", **claim), check=False)
    assert result.code != 0
    assert "denied the request" in result.stderr and refusal in result.stderr


def test_a_pod_whose_claim_fits_is_stored_and_left_to_the_scheduler(dra: Kubectl):
    dra.create(claim_pod("fits", resourceClaimTemplateName="one-gpu"))
    stored = dra.get("pod", "fits", "-n", NAMESPACE)
    assert stored["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "one-gpu"}]
