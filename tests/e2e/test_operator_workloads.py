"""The GPU workloads of 2025-26 against the real API server: their CRDs registered (schemaless, as
a cluster without the operators running would have them), `kubectl apply --dry-run=server` of a
TrainJob, a NIMService and a DynamoGraphDeployment reaches the workload webhook generated for
each, and what their pods would ask is judged at apply time."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import Installation, policy_configmap, wait_for
from tests.e2e.kubectl import Kubectl

NAMESPACE = "operators-team"
CAP = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-operators
spec:
  match:
    namespaces: [operators-team]
  quota:
    perPod:
      gpuEquivalents: "1"
"""
KINDS = {
    "TrainJob": ("trainer.kubeflow.org", "trainjobs"),
    "NIMService": ("apps.nvidia.com", "nimservices"),
    "DynamoGraphDeployment": ("nvidia.com", "dynamographdeployments"),
}


def crd(kind: str) -> dict[str, Any]:
    group, plural = KINDS[kind]
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {"name": version, "served": True, "storage": version == "v1alpha1", "schema": schema}
                for version in (("v1alpha1", "v1beta1") if kind == "DynamoGraphDeployment" else ("v1alpha1",))
            ],
        },
    }


def workload(kind: str, spec: dict[str, Any], version: str = "v1alpha1") -> str:
    group = KINDS[kind][0]
    metadata = {"name": kind.lower(), "namespace": NAMESPACE}
    return json.dumps({"apiVersion": f"{group}/{version}", "kind": kind, "metadata": metadata, "spec": spec})


# Dynamo's v1beta1 (its storage version, what its examples ship now): components hold pod templates.
DYNAMO_V1BETA1 = {
    "components": [
        {
            "name": "VllmDecodeWorker",
            "replicas": 2,
            "podTemplate": {"spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}},
        }
    ]
}


def trainjob(gpus: int) -> str:
    trainer = {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": gpus}}}
    return workload("TrainJob", {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer})


@pytest.fixture(scope="module")
def operators(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    for kind in KINDS:
        kubectl.apply(json.dumps(crd(kind)))
    names = [f"crd/{plural}.{group}" for group, plural in KINDS.values()]
    kubectl.run("wait", "--for=condition=Established", *names, "--timeout=60s")
    kubectl.apply(policy_configmap("e2e-operators", CAP))
    wait_for(
        lambda: kubectl.apply(trainjob(8), "--dry-run=server", check=False).code != 0,
        "the e2e-operators policy, and the TrainJob kind served",
    )
    return kubectl


@pytest.mark.parametrize(
    "manifest, where",
    [
        (trainjob(8), "TrainJob operators-team/trainjob spec.trainer.resourcesPerNode"),
        (workload("NIMService", {"replicas": 1, "resources": {"limits": {"nvidia.com/gpu": 2}}}), "spec.resources"),
        (
            workload("DynamoGraphDeployment", {"services": {"Worker": {"resources": {"limits": {"gpu": "4"}}}}}),
            "spec.services.Worker.resources",
        ),
        (workload("DynamoGraphDeployment", DYNAMO_V1BETA1, "v1beta1"), "spec.components[0].podTemplate"),
    ],
    ids=["trainjob", "nimservice", "dynamographdeployment", "dynamographdeployment-v1beta1"],
)
def test_a_workload_whose_operator_would_make_pods_over_a_cap_is_refused_at_apply(operators: Kubectl, manifest, where):
    result = operators.apply(manifest, "--dry-run=server", check=False)
    assert result.code != 0
    assert "workloads.gpu-admission.io" in result.stderr and "per-pod cap of 1" in result.stderr
    assert where in result.stderr


def test_one_within_the_cap_is_stored_untouched(operators: Kubectl):
    operators.apply(trainjob(1))
    stored = operators.get("trainjob", "trainjob", "-n", NAMESPACE)
    assert stored["spec"]["trainer"]["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": 1}}
