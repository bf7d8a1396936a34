"""What a user reads through real kubectl: denials naming the policy, rule, object and field,
unreadable quantities denied (not a failed webhook call), multi-line warnings printed, broken
policy ConfigMaps refused, and `--dry-run=server` giving the same answers while writing nothing."""

from __future__ import annotations

import json
import re

import pytest

from tests.e2e.harness import Installation, pod, policy_configmap, wait_for, wait_rewritten
from tests.e2e.install import NAMESPACE
from tests.e2e.kubectl import Kubectl
from tests.e2e.policies import BROKEN, QUOTA, TEAMS

GPU = {"limits": {"nvidia.com/gpu": 1}}
WARNING = "GPU pods should say who owns them. Add the annotation owner=<you>."


@pytest.fixture(scope="module")
def cluster(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.apply(policy_configmap("e2e-teams", TEAMS))
    kubectl.apply(policy_configmap("e2e-quota", QUOTA.format(limit=3)))
    for namespace in ("team-answers", "quota-dry"):
        kubectl.run("create", "namespace", namespace)
    probe = pod("probe", "quota-dry", gpus=1)
    wait_rewritten(kubectl, probe, "the e2e policies to be loaded")
    return kubectl


def test_a_denial_names_the_webhook_policy_rule_and_object(cluster: Kubectl):
    result = cluster.create(pod("no-team", "team-answers", gpus=1), check=False)
    assert result.code != 0
    assert 'admission webhook "validate-pods.gpu-admission.io" denied the request:' in result.stderr
    for part in ("GPU pods need a team label", "e2e-teams", "require-team-label", "Pod team-answers/no-team"):
        assert part in result.stderr, part


@pytest.mark.parametrize("value", ["0.5", "-1", "999m", "1.5"], ids=["half", "negative", "milli", "fraction"])
def test_an_unreadable_gpu_quantity_is_denied_naming_the_field_not_a_failed_webhook_call(cluster: Kubectl, value):
    result = cluster.create(pod("bad-quantity", "team-answers", gpus=value, labels={"team": "a"}), check=False)
    assert result.code != 0
    assert "failed calling webhook" not in result.stderr and "Internal error" not in result.stderr
    assert 'admission webhook "mutate.gpu-admission.io" denied the request:' in result.stderr
    # The API server defaults requests from limits and writes quantities canonically ("0.5" is
    # "500m") before any webhook sees the pod: either field may be the one named.
    assert re.search(r"spec\.containers\[0\]\.resources\.(limits|requests)\.nvidia\.com/gpu", result.stderr)


def test_a_multi_line_policy_warning_is_printed_by_kubectl_on_one_line(cluster: Kubectl):
    result = cluster.create(pod("warned", "team-answers", gpus=1, labels={"team": "a"}))
    assert any(WARNING in warning for warning in result.warnings), result.stderr


def test_a_broken_policy_configmap_is_refused_with_its_problems(cluster: Kubectl):
    result = cluster.apply(policy_configmap("e2e-broken", BROKEN), check=False)
    assert result.code != 0
    assert 'admission webhook "validate-policies.gpu-admission.io" denied the request:' in result.stderr
    assert "e2e-broken" in result.stderr and "9g.900gb" in result.stderr
    assert cluster.run("get", "configmap", "e2e-broken", "-n", NAMESPACE, check=False).code != 0


def quota_leases(kubectl: Kubectl) -> dict[str, str]:
    leases = kubectl.get("leases", "-n", NAMESPACE)["items"]
    return {
        lease["metadata"]["name"]: lease["metadata"]["resourceVersion"]
        for lease in leases
        if lease["metadata"]["name"] not in ("gpu-admission-certs", "gpu-admission-status")
    }


def events(kubectl: Kubectl, namespace: str, name: str) -> list[str]:
    """Events about the object (the background audit and the scheduler write theirs about earlier
    objects of the namespace at their own pace)."""
    return [
        event["metadata"]["name"]
        for event in kubectl.get("events", "-n", namespace)["items"]
        if (event.get("involvedObject") or {}).get("name") == name
    ]


def deployment(name: str, namespace: str, labels: dict[str, str]) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name, **labels}},
                    "spec": {
                        "containers": [
                            {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                        ]
                    },
                },
            },
        }
    )


@pytest.mark.parametrize(
    "manifest, namespace",
    [
        (pod("dry-pod", "team-answers", gpus=1, labels={"team": "a"}), "team-answers"),
        (pod("dry-denied", "team-answers", gpus=1), "team-answers"),
        (pod("dry-quota", "quota-dry", gpus=1), "quota-dry"),
        (deployment("dry-deploy", "team-answers", {"team": "a"}), "team-answers"),
        (deployment("dry-deploy-denied", "team-answers", {}), "team-answers"),
        (policy_configmap("e2e-broken", BROKEN), NAMESPACE),
    ],
    ids=["warned-pod", "denied-pod", "quota-pod", "warned-deployment", "denied-deployment", "broken-policy"],
)
def test_a_server_dry_run_answers_as_the_real_apply_and_writes_nothing(cluster: Kubectl, manifest, namespace):
    name = json.loads(manifest)["metadata"]["name"]
    leases, before = quota_leases(cluster), events(cluster, namespace, name)
    dry = cluster.apply(manifest, "--dry-run=server", check=False)
    assert quota_leases(cluster) == leases, "a dry run wrote a quota Lease"
    assert events(cluster, namespace, name) == before, "a dry run wrote an Event"
    kind = json.loads(manifest)["kind"].lower()
    assert cluster.run("get", kind, name, "-n", namespace, check=False).code != 0, "a dry run stored the object"
    real = cluster.apply(manifest, check=False)
    assert (dry.code == 0) == (real.code == 0), (dry.stderr, real.stderr)
    assert dry.warnings == real.warnings
    strip = lambda text: text.replace(" (server dry run)", "")  # noqa: E731
    assert strip(dry.stderr.replace("dry-run", "")).strip() == strip(real.stderr.replace("dry-run", "")).strip()


LONG_NAMED = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: research-org-gpu-quota-policy-for-the-ml-platform-team
spec:
  match:
    namespaces: [audited]
  rules:
    - name: per pod cap
      expression: "false"
      message: "recorded for the platform team"
      action: audit
    - name: in-force
      expression: "false"
      message: "the long-named policy is in force"
      action: warn
"""


def test_an_audit_rule_of_a_long_named_policy_lands_in_the_api_servers_audit_log(
    installation: Installation, cluster: Kubectl
):
    """The API server keeps `<webhook>/<key>` only if it is a qualified name (63 characters, an
    alphanumeric at each end); the key cut at 63 used to end in '-' and was dropped."""
    cluster.apply(policy_configmap("e2e-long-named", LONG_NAMED))
    cluster.run("create", "namespace", "audited")
    wait_for(
        lambda: (
            "is in force" in cluster.create(pod("probe", "audited", gpus=1), "--dry-run=server", check=False).stderr
        ),
        "the long-named policy loaded",
    )
    cluster.create(pod("recorded", "audited", gpus=1))
    log = installation.control_plane.audit_log.read_text()
    events = [json.loads(line) for line in log.splitlines() if '"recorded"' in line]
    keys = {key for event in events for key in (event.get("annotations") or {})}
    ours = [key for key in keys if key.startswith("validate-pods.gpu-admission.io/")]
    assert ours == ["validate-pods.gpu-admission.io/research-org-gpu-quota-policy-for-the-ml-platform-team.per-pod"], (
        keys
    )
