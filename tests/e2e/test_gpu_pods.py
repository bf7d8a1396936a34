"""GPU pods, Deployments and Jobs through real kubectl: what is stored, where it is bound, and
that a second webhook pass over what the API server stored changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import Installation, pod, policy_configmap, wait_for, wait_rewritten
from tests.e2e.kubectl import Kubectl
from tests.e2e.policies import TEAMS

MIXED_NODES = {"h100-mixed", "a100-mixed"}


@pytest.fixture(scope="module")
def teams(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.apply(policy_configmap("e2e-teams", TEAMS))
    kubectl.run("create", "namespace", "team-a")
    # The policy is live once a pod of team-a is rewritten by it (a policy load has no API event).
    probe = pod("probe", "team-a", gpus=1, labels={"team": "a"})
    wait_rewritten(kubectl, probe, "the e2e-teams policy to be loaded")
    return kubectl


def limits_of(stored: dict[str, Any]) -> dict[str, str]:
    return stored["spec"]["containers"][0]["resources"]["limits"]


def bound_node(kubectl: Kubectl, namespace: str, name: str) -> str:
    try:
        return wait_for(
            lambda: kubectl.get("pod", name, "-n", namespace)["spec"].get("nodeName"), f"pod {namespace}/{name} bound"
        )
    except AssertionError as error:
        stored = kubectl.get("pod", name, "-n", namespace)
        raise AssertionError(f"{error}: {stored['status']}, {json.dumps(stored['spec'])}") from None


@pytest.mark.parametrize(
    "annotations, resource, nodes",
    [
        ({"gpu-admission.io/mig-profile": "1g.10gb"}, "nvidia.com/mig-1g.10gb", MIXED_NODES),
        ({"gpu-admission.io/gpu-memory": "15Gi"}, "nvidia.com/mig-2g.20gb", {"h100-mixed"}),
        ({"gpu-admission.io/mig-profile": "3g.40gb"}, "nvidia.com/mig-3g.40gb", {"h100-mixed"}),
    ],
    ids=["mig-profile", "gpu-memory", "big-profile"],
)
def test_a_gpu_pod_is_stored_with_its_mig_slice_and_bound_to_a_node_that_offers_it(
    teams: Kubectl, annotations, resource, nodes
):
    name = resource.rsplit("-", 1)[-1].replace(".", "-")
    teams.create(pod(f"ask-{name}", "team-a", gpus=1, annotations=annotations, labels={"team": "a"}))
    stored = teams.get("pod", f"ask-{name}", "-n", "team-a")
    assert limits_of(stored) == {resource: "1"}
    assert "gpu-admission.io/mutated" in stored["metadata"]["annotations"]
    assert bound_node(teams, "team-a", f"ask-{name}") in nodes


def test_a_pod_no_node_can_serve_stays_pending_and_the_scheduler_says_which_resource(teams: Kubectl):
    teams.run("create", "namespace", "plain-gpu")
    teams.create(pod("unservable", "plain-gpu", resources={"nvidia.com/mig-1g.20gb": 1}))

    def unschedulable() -> str:
        conditions = teams.get("pod", "unservable", "-n", "plain-gpu")["status"].get("conditions") or []
        return next((c.get("message", "") for c in conditions if c.get("reason") == "Unschedulable"), "")

    verdict = wait_for(unschedulable, "the scheduler's verdict")
    # Device-plugin nodes say the name; the others, where the DeviceClass we ship serves it through
    # DRA (docs/mig-backends.md), that no device can be allocated for the claim it would make.
    assert "Insufficient nvidia.com/mig-1g.20gb" in verdict or "cannot allocate all claims" in verdict, verdict


def test_a_deployment_and_a_job_make_pods_the_api_server_stores_with_mig_slices(teams: Kubectl):
    template = json.loads(pod("t", "team-a", gpus=1, labels={"team": "a", "app": "infer"}))
    del template["metadata"]["name"], template["metadata"]["namespace"], template["apiVersion"], template["kind"]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infer", "namespace": "team-a"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "infer"}}, "template": template},
    }
    job_template = json.loads(json.dumps(template))
    job_template["metadata"]["labels"]["app"] = "train"
    job_template["spec"]["restartPolicy"] = "Never"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"template": job_template, "backoffLimit": 0},
    }
    teams.apply(json.dumps(deployment))
    teams.apply(json.dumps(job))
    for app, count in (("infer", 2), ("train", 1)):
        pods = wait_for(
            lambda app=app, count=count: (
                [
                    p
                    for p in teams.get("pods", "-n", "team-a", "-l", f"app={app}")["items"]
                    if p["spec"].get("nodeName")
                ][:count]
                if len(teams.get("pods", "-n", "team-a", "-l", f"app={app}")["items"]) >= count
                else None
            ),
            f"{count} {app} pods bound",
        )
        for stored in pods:
            assert limits_of(stored) == {"nvidia.com/mig-1g.10gb": "1"}, stored["metadata"]["name"]
            assert stored["spec"]["nodeName"] in MIXED_NODES


def test_a_second_pass_over_a_stored_pod_changes_nothing(teams: Kubectl):
    """The API server re-defaults the object after our patch (service-account volume, default
    tolerations): the same pod created again as stored must come back the same."""
    teams.create(pod("first", "team-a", gpus=1, labels={"team": "a"}, annotations={"owner": "me"}))
    stored = teams.get("pod", "first", "-n", "team-a")
    again = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "again",
            "namespace": "team-a",
            "labels": stored["metadata"]["labels"],
            "annotations": stored["metadata"]["annotations"],
        },
        "spec": {k: v for k, v in stored["spec"].items() if k != "nodeName"},
    }
    result = teams.create(json.dumps(again))
    assert result.code == 0 and not result.warnings
    second = teams.get("pod", "again", "-n", "team-a")
    assert second["metadata"]["annotations"] == stored["metadata"]["annotations"]
    assert {k: v for k, v in second["spec"].items() if k != "nodeName"} == again["spec"]
