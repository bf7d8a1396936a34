"""Pods that change after admission, on the real API server: a running pod relabelled into a
budget it was not in is judged there as a CREATE, and a bound pod may not drop or lower the GPU
share KAI's annotation gave it (the shipped webhook is sent that UPDATE, though the pod as
updated reaches no GPU by itself)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import Installation, policy_configmap, wait_refused
from tests.e2e.kubectl import Kubectl

TEAMS, SHARES = "label-teams", "bound-shares"
TEAM_POLICY = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-team-{team}
spec:
  match:
    namespaces: [{namespace}]
    podSelector: {{matchLabels: {{team: {team}}}}}
  quota:
    limits: {{gpus: 1}}
"""
SHARE_POLICY = f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-bound-shares
spec:
  match:
    namespaces: [{SHARES}]
  quota:
    limits: {{gpuEquivalents: "4"}}
"""


def team_pod(name: str, team: str) -> str:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    metadata = {"name": name, "namespace": TEAMS, "labels": {"team": team}}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}})


def fraction_pod(name: str, fraction: str) -> str:
    """Bound at creation (no KAI here to bind it): what a running KAI fraction pod looks like."""
    metadata: dict[str, Any] = {"name": name, "namespace": SHARES, "annotations": {"gpu-fraction": fraction}}
    spec = {"containers": [{"name": "main", "image": "cuda"}], "schedulerName": "kai-scheduler", "nodeName": "gpu-1"}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})


@pytest.fixture(scope="module")
def teams(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    for namespace in (TEAMS, SHARES):
        kubectl.run("create", "namespace", namespace)
    for team in ("a", "b"):
        text = TEAM_POLICY.format(team=team, namespace=TEAMS)
        kubectl.apply(policy_configmap(f"e2e-team-{team}", text))
    kubectl.apply(policy_configmap("e2e-bound-shares", SHARE_POLICY))
    kubectl.create(team_pod("b-holds-its-one", "b"))
    wait_refused(kubectl, team_pod("probe", "b"), "the team budgets to be in force")
    return kubectl


def test_a_running_pod_relabelled_into_a_full_budget_is_refused_and_one_with_room_is_not(teams: Kubectl):
    teams.create(team_pod("a-runs", "a"))
    moved = teams.run("label", "pod", "-n", TEAMS, "a-runs", "team=b", "--overwrite", check=False)
    assert moved.code != 0 and "gpus 1 + 1 exceeds 1" in moved.stderr and "e2e-team-b" in moved.stderr, moved.stderr
    teams.run("label", "pod", "-n", TEAMS, "a-runs", "owner=someone")  # staying in its budget: judged on nothing new


@pytest.mark.parametrize(
    "change, reason",
    [
        (("annotate", "gpu-fraction-"), "a bound pod keeps the GPU share it was given (0.5 GPU by gpu-fraction)"),
        (("annotate", "gpu-fraction=0.25", "--overwrite"), "lowering it to 0.25"),
    ],
    ids=["removed", "lowered"],
)
def test_a_bound_pod_may_not_drop_or_lower_its_gpu_share(teams: Kubectl, change, reason):
    name = f"half-{change[1][:14].strip('=-.').replace('=', '-').replace('.', '')}"
    teams.create(fraction_pod(name, "0.5"))
    result = teams.run(change[0], "pod", "-n", SHARES, name, *change[1:], check=False)
    assert result.code != 0 and reason in result.stderr, result.stderr
    assert teams.get("pod", "-n", SHARES, name)["metadata"]["annotations"]["gpu-fraction"] == "0.5"
    teams.run(
        "annotate", "pod", "-n", SHARES, name, "gpu-fraction=0.75", "--overwrite"
    )  # raising it is judged as growth
