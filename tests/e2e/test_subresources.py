"""Subresources against the real API server. `kubectl scale`: the Scale subresource reaches the
validate-scale webhook, which reads the Deployment and judges the pods a scale-up adds, so a
budget that cannot hold them refuses the scale itself (before, it said "scaled" and the reason
hid in ReplicaSet events). `pods/resize`: a pod's memory resized in place past a rule is refused
(before, resize never reached the webhook)."""

from __future__ import annotations

import json

import pytest

from tests.e2e.harness import Installation, policy_configmap, wait_for
from tests.e2e.kubectl import Kubectl

NAMESPACE, RESIZED = "scale-team", "resize-team"  # a budget each
POLICY = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-scale
spec:
  match:
    namespaces: [scale-team, resize-team]
  quota:
    limits: {pods: 3}
  rules:
    - name: at-most-64gi
      expression: >-
        object.spec.containers.all(c, !has(c.resources.limits) || !('memory' in c.resources.limits)
        || quantity(c.resources.limits['memory']).compareTo(quantity('64Gi')) <= 0)
      message: a GPU pod's containers may hold at most 64Gi of memory
"""


def deployment(name: str, replicas: int, gpus: bool = True) -> str:
    container: dict[str, object] = {"name": "main", "image": "cuda"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }
    )


@pytest.fixture(scope="module")
def team(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    kubectl.run("create", "namespace", RESIZED)
    kubectl.apply(policy_configmap("e2e-scale", POLICY))
    # In force once a Deployment of more pods than it holds is warned of at apply.
    wait_for(
        lambda: any(
            "e2e-scale" in w for w in kubectl.apply(deployment("probe", 4), "--dry-run=server", check=False).warnings
        ),
        "the e2e-scale policy",
    )
    kubectl.apply(deployment("serve", 2))
    wait_for(lambda: len(kubectl.get("pods", "-n", NAMESPACE, "-l", "app=serve")["items"]) == 2, "serve's 2 pods made")
    return kubectl


def scale(kubectl: Kubectl, name: str, replicas: int, *args: str):
    return kubectl.run("scale", f"deployment/{name}", "-n", NAMESPACE, f"--replicas={replicas}", *args, check=False)


def test_reapplying_or_labelling_a_running_deployment_warns_of_nothing(team: Kubectl):
    """Its running pods are counted once (#41): before, every GitOps sync warned "2 replicas would
    hold pods 2 + 2x1 = 4, over 3"."""
    assert not team.apply(deployment("serve", 2)).warnings
    assert not team.run("label", "deployment", "serve", "-n", NAMESPACE, "tier=gold").warnings
    (warning,) = team.apply(deployment("serve", 4), "--dry-run=server").warnings
    assert "4 replicas (from 2) would hold pods 2 + 2x1 = 4, over 3 (policy e2e-scale)" in warning


def test_a_scale_up_past_the_budget_is_refused_at_kubectl_scale(team: Kubectl):
    for args in (("--dry-run=server",), ()):
        result = scale(team, "serve", 5, *args)
        assert result.code != 0
        assert "validate-scale.gpu-admission.io" in result.stderr
        assert "scaling from 2 to 5 adds 3 pods, pods 2 + 3x1 = 5, over 3 (policy e2e-scale)" in result.stderr
    assert team.get("deployment", "serve", "-n", NAMESPACE)["spec"]["replicas"] == 2


def test_a_scale_up_the_budget_holds_and_a_scale_down_pass(team: Kubectl):
    assert scale(team, "serve", 3).code == 0
    assert scale(team, "serve", 1).code == 0
    assert team.get("deployment", "serve", "-n", NAMESPACE)["spec"]["replicas"] == 1


def test_a_deployment_without_gpus_scales_freely(team: Kubectl):
    team.apply(deployment("web", 1, gpus=False))
    assert scale(team, "web", 20, "--dry-run=server").code == 0


def test_a_pod_resized_in_place_past_a_rule_is_refused(team: Kubectl):
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "32Gi"}}}
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "resized", "namespace": RESIZED},
        "spec": {"containers": [container]},
    }
    team.create(json.dumps(manifest))

    def resize(memory: str):
        patch = json.dumps({"spec": {"containers": [{"name": "main", "resources": {"limits": {"memory": memory}}}]}})
        return team.run(
            "patch", "pod", "resized", "-n", RESIZED, "--subresource=resize", "--type=strategic", "-p", patch,
            check=False,
        )  # fmt: skip

    refused = resize("128Gi")
    assert refused.code != 0
    assert "validate-pods.gpu-admission.io" in refused.stderr and "at most 64Gi of memory" in refused.stderr
    assert resize("48Gi").code == 0, resize("48Gi").stderr
    limits = team.get("pod", "resized", "-n", RESIZED)["spec"]["containers"][0]["resources"]["limits"]
    assert limits["memory"] == "48Gi"
