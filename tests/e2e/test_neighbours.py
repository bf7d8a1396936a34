"""gpu-admission beside the API server's own admission: a MutatingAdmissionPolicy that edits GPU
pods after our patch (reinvocation), and a ValidatingAdmissionPolicy judging the same rule."""

from __future__ import annotations

import random

import pytest

from tests.e2e.harness import Installation, pod, policy_configmap, wait_for, wait_refused, wait_rewritten
from tests.e2e.kubectl import Kubectl
from tests.e2e.policies import TEAM_LABEL_VAP, TEAMS

LABEL_MIG_PODS = """\
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata: {name: label-mig-pods}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-reinvoke}}
  failurePolicy: Fail
  # Runs before our webhook (the API server's order) and labels the pod "whole"; our webhook turns
  # nvidia.com/gpu into a slice, so the API server runs this policy again, it relabels the pod
  # "mig", and our webhook is called a second time on its own output.
  reinvocationPolicy: IfNeeded
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >-
          Object{metadata: Object.metadata{labels: {"gpu-kind":
            object.spec.containers.exists(c, has(c.resources) && has(c.resources.limits) &&
              c.resources.limits.exists(r, r.startsWith('nvidia.com/mig-'))) ? "mig" : "whole"}}}
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicyBinding
metadata: {name: label-mig-pods}
spec:
  policyName: label-mig-pods
"""


@pytest.fixture(scope="module")
def teams(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.apply(policy_configmap("e2e-teams", TEAMS))
    for namespace in ("team-reinvoke", "team-ours", "vap-side"):
        kubectl.run("create", "namespace", namespace)
    probe = pod("probe", "team-ours", gpus=1, labels={"team": "a"})
    wait_rewritten(kubectl, probe, "the e2e-teams policy to be loaded")
    return kubectl


def test_a_mutating_admission_policy_after_ours_leaves_the_pod_right_and_our_second_call_empty(
    installation: Installation, teams: Kubectl
):
    teams.apply(LABEL_MIG_PODS)
    probe = pod("probe", "team-reinvoke", gpus=1, labels={"team": "a"})
    wait_for(
        lambda: '"gpu-kind"' in teams.create(probe, "--dry-run=server", "-o", "json", check=False).stdout,
        "the MutatingAdmissionPolicy to be in force",
    )
    teams.create(pod("reinvoked", "team-reinvoke", gpus=1, labels={"team": "a"}))
    stored = teams.get("pod", "reinvoked", "-n", "team-reinvoke")
    assert stored["metadata"]["labels"]["gpu-kind"] == "mig"
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    calls = [
        review
        for replica in installation.replicas
        for review in replica.reviews()
        if review.get("endpoint") == "mutate" and review.get("name") == "reinvoked" and not review.get("dryRun")
    ]
    assert [call["decision"] for call in calls] == ["patched", "allowed"], calls


def generated_pods(count: int, namespace: str) -> list[tuple[str, str]]:
    chooser = random.Random(20261203)
    shapes = [None, {}, {"team": "a"}, {"team": ""}, {"app": "x"}, {"Team": "a"}, {"team": "b", "app": "y"}]
    pods = []
    for index in range(count):
        labels = chooser.choice(shapes)
        pods.append((f"p{index}", pod(f"p{index}", namespace, gpus=1, labels=labels)))
    return pods


def test_the_team_label_rule_as_a_validating_admission_policy_and_as_ours_agree_on_50_pods(teams: Kubectl):
    teams.apply(TEAM_LABEL_VAP)
    wait_refused(teams, pod("probe", "vap-side", gpus=1), "the ValidatingAdmissionPolicy to be in force")
    verdicts = []
    for (name, ours), (_, theirs) in zip(generated_pods(50, "team-ours"), generated_pods(50, "vap-side"), strict=True):
        ours_result = teams.create(ours, "--dry-run=server", check=False)
        theirs_result = teams.create(theirs, "--dry-run=server", check=False)
        verdicts.append((name, ours_result.code == 0, theirs_result.code == 0))
    assert all(ours == theirs for _, ours, theirs in verdicts), [v for v in verdicts if v[1] != v[2]]
    assert {ours for _, ours, _ in verdicts} == {True, False}, "the generated pods cover both verdicts"
