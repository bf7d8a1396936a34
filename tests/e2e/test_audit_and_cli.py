"""The background audit's PolicyReports as `kubectl get policyreports -A` lists them, and the
CLI (`kubectl gpu-admission quota`, `audit --live`) against the same cluster."""

from __future__ import annotations

import json

import pytest

from tests.e2e.harness import Installation, pod, policy_configmap, wait_for
from tests.e2e.kubectl import Kubectl
from tests.e2e.policies import QUOTA, TEAMS


@pytest.fixture(scope="module")
def teams(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.apply(policy_configmap("e2e-teams", TEAMS))
    kubectl.apply(
        policy_configmap(
            "e2e-views", QUOTA.replace("e2e-quota", "e2e-views").replace("quota-*", "team-view").format(limit=4)
        )
    )
    kubectl.run("create", "namespace", "team-view")
    wait_for(
        lambda: kubectl.create(pod("audited", "team-view", gpus=1, labels={"team": "a"}), check=False).code == 0,
        "the e2e policies loaded",
    )
    return kubectl


def test_the_background_audit_writes_policy_reports_kubectl_lists(teams: Kubectl):
    def report() -> dict | None:
        reports = teams.get("policyreports", "-A")["items"]
        return next((r for r in reports if r["metadata"]["namespace"] == "team-view" and r.get("results")), None)

    found = wait_for(report, "a PolicyReport for team-view", seconds=90, every=1)
    rules = {(result["policy"], result["rule"], result["result"]) for result in found["results"]}
    assert ("e2e-teams", "record-image", "fail") in rules, rules
    listed = teams.run("get", "policyreports", "-A").stdout
    assert "team-view" in listed and "gpu-admission" in listed


def test_kubectl_gpu_admission_quota_reads_the_cluster_named_by_kubeconfig_and_context(
    installation: Installation, teams: Kubectl
):
    kubeconfig = str(installation.control_plane.kubeconfig)
    flags = ("--kubeconfig", kubeconfig, "--context", "e2e")
    result = teams.run("gpu-admission", "quota", "-n", "team-view", "-o", "json", *flags, KUBECONFIG="/nonexistent")
    view = json.loads(result.stdout)
    assert "e2e-views" in json.dumps(view), view
    wrong = teams.run("gpu-admission", "quota", "--kubeconfig", kubeconfig, "--context", "nope", check=False)
    assert wrong.code == 2 and "error:" in wrong.stderr and "Traceback" not in wrong.stderr


def test_kubectl_gpu_admission_audit_reads_the_live_cluster(installation: Installation, teams: Kubectl, tmp_path):
    (tmp_path / "teams.yaml").write_text(TEAMS)
    kubeconfig = str(installation.control_plane.kubeconfig)
    flags = ("--kubeconfig", kubeconfig, "--context", "e2e", "--policies", str(tmp_path))
    result = teams.run("gpu-admission", "audit", "--live", *flags, "-o", "json", check=False, KUBECONFIG="/nonexistent")
    assert result.code == 1, result.stderr  # the record-image audit rule fails on these pods
    assert "record-image" in result.stdout
    # With no --policies, the cluster's own policy ConfigMaps, as the webhook enforces them (#41:
    # the bundled default said "0 findings" while the cluster's PolicyReports listed failures).
    own = ("--kubeconfig", kubeconfig, "--context", "e2e")
    result = teams.run("gpu-admission", "audit", "--live", *own, check=False, KUBECONFIG="/nonexistent")
    assert result.code == 1, result.stderr
    assert "record-image" in result.stdout and "judged with the cluster's" in result.stderr


def test_audit_live_with_no_cluster_is_bad_input_not_a_traceback(teams: Kubectl, tmp_path):
    result = teams.run("gpu-admission", "audit", "--live", "--kubeconfig", str(tmp_path / "none"), check=False)
    assert result.code == 2 and result.stderr.startswith("error:") and "Traceback" not in result.stderr


def test_audit_live_finds_a_configmap_the_webhook_never_saw(installation: Installation, teams: Kubectl, tmp_path):
    """Written where no webhook judges (an excluded namespace, or before the install), a ConfigMap
    that hands every GPU to a GPU-less pod by envFrom is found by `audit --live --env-sources`,
    read with the caller's rights."""
    teams.run("create", "namespace", "nvidia-device-plugin", check=False)  # excluded by the webhooks
    teams.run(
        "create", "configmap", "devices", "-n", "nvidia-device-plugin", "--from-literal=NVIDIA_VISIBLE_DEVICES=all"
    )
    (tmp_path / "late.yaml").write_text(
        "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: late}\n"
        "spec: {match: {namespaces: [nvidia-device-plugin]}}\n"
    )
    kubeconfig = str(installation.control_plane.kubeconfig)
    flags = ("--kubeconfig", kubeconfig, "--context", "e2e", "--policies", str(tmp_path), "--env-sources")
    result = teams.run("gpu-admission", "audit", "--live", *flags, check=False, KUBECONFIG="/nonexistent")
    assert result.code == 1, result.stderr
    assert "FAIL ConfigMap nvidia-device-plugin/devices: ConfigMap key NVIDIA_VISIBLE_DEVICES grants" in result.stdout


def test_a_tenant_with_edit_sees_their_reports_and_their_quota(installation: Installation, teams: Kubectl):
    """#41: no role let a tenant read PolicyReports, and `quota -n NS` as a tenant printed three 403
    notes and "no quota holds anything" with exit 0. Real RBAC, by impersonation, as kubectl does."""
    teams.run("create", "rolebinding", "tenant-edit", "-n", "team-view", "--clusterrole=edit", "--user=tenant")
    wait_for(  # the controller-manager aggregates our role into edit
        lambda: teams.run("get", "policyreports", "-n", "team-view", "--as", "tenant", check=False).code == 0,
        "PolicyReports readable with edit",
    )
    assert teams.run("get", "policyreports", "-n", "default", "--as", "tenant", check=False).code != 0
    kubeconfig = str(installation.control_plane.kubeconfig)
    flags = ("--kubeconfig", kubeconfig, "--context", "e2e", "--as", "tenant")
    result = teams.run("gpu-admission", "quota", "-n", "team-view", *flags, check=False, KUBECONFIG="/nonexistent")
    assert result.code == 0, result.stderr
    assert "e2e-views" in result.stdout and "team-view" in result.stdout
    # Without the policies nothing can be said: an error, never "no quota holds anything".
    result = teams.run(
        "gpu-admission", "quota", "-n", "team-view", *flags, "--policy-namespace", "kube-system",
        check=False, KUBECONFIG="/nonexistent",
    )  # fmt: skip
    assert result.code == 2 and "could not be read" in result.stderr
