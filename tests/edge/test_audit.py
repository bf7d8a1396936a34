"""The background audit: existing GPU pods judged again (rules, budgets now over, requests their
node no longer offers), PolicyReports written by the leader's audit process, Events for new
violations, the violation metric; and `gpu-admission audit` offline."""

import json
import subprocess
import threading
from pathlib import Path

import jsonschema
import pytest
import yaml

from policies.audit.judging import audit_pods
from policies.audit.policyreport import MAX_RESULTS, TRUNCATED, policy_reports
from policies.gpu.capacity import node_gpus
from policies.review.cluster import KnownCluster
from tests.support.builders import engine_from
from webhook.cli.main import main
from webhook.cluster.audit.background_audit import BackgroundAudit, run_process
from webhook.metrics import exposition

ROOT = Path(__file__).parents[2]
TRAINING = (ROOT / "examples/policies/training-quota.yaml").read_text()
CRDS = list(yaml.safe_load_all((ROOT / "deploy/components/policyreport-crds/policyreport-crds.yaml").read_text()))


def pod(name, resources, labels=None, node="n1", namespace="team-a", phase="Running"):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [{"name": "m", "image": "x", "resources": {"limits": resources}}]},
        "status": {"phase": phase},
    }


def node(name="n1", state="success", allocatable=None):
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/mig.config.state": state}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable or {}},
    }


TEAM = {"team": "a"}
SEVEN = {"nvidia.com/mig-1g.10gb": "7"}
SLICE = {"nvidia.com/mig-1g.10gb": "1"}


def run(pods, nodes=(), policies=TRAINING):
    engine = engine_from(policies)
    by_name = {n.name: n for n in (node_gpus(raw) for raw in nodes)}
    return audit_pods(engine, pods, KnownCluster({"team-a": {}}), by_name)


def test_a_pod_a_rule_now_denies_fails_and_a_clean_one_passes():
    report = run([pod("ok", SLICE, TEAM), pod("unlabelled", SLICE)])
    assert [(f.pod, f.policy, f.rule, f.result) for f in report.findings] == [
        ("unlabelled", "team-a-training", "require-team-label", "fail")
    ]
    assert report.judged["team-a"] == 2


def test_a_budget_its_pods_now_overrun_fails_once_for_the_scope():
    report = run([pod(f"p{i}", SLICE, TEAM) for i in range(30)])
    scope = [f for f in report.findings if not f.pod]
    assert {f.rule for f in scope} == {"quota.gpuEquivalents", "quota.pods"}
    assert "pods held 30, over the limit of 20" in next(f.message for f in scope if f.rule == "quota.pods")


def test_a_request_its_node_no_longer_offers_fails_and_a_node_being_split_warns():
    pods = [pod("big", {"nvidia.com/mig-3g.40gb": "1"}, TEAM), pod("small", SLICE, TEAM)]
    settled = run(pods, [node(allocatable=SEVEN)])
    assert [(f.pod, f.rule, f.result) for f in settled.findings] == [("big", "servable-on-node", "fail")]
    assert "no longer offers (nvidia.com/mig-1g.10gb)" in settled.findings[0].message
    splitting = run(pods, [node(state="pending", allocatable=SEVEN)])
    assert {(f.pod, f.result) for f in splitting.findings} == {("big", "warn"), ("small", "warn")}


def test_pods_without_gpus_finished_pods_and_other_sharing_systems_are_left_alone():
    pods = [
        pod("cpu", {"cpu": "1"}),
        pod("done", SLICE, phase="Succeeded"),
        pod("hami", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}, TEAM),
    ]
    report = run(pods, [node(allocatable={**SEVEN, "nvidia.com/gpu": "1"})])
    assert report.judged["team-a"] == 1 and not [
        f for f in report.findings if f.pod != "hami" or f.rule == "servable-on-node"
    ]


def crd_schema(kind):
    crd = next(c for c in CRDS if c["spec"]["names"]["kind"] == kind)
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_reports_follow_the_policy_wg_format_and_the_shipped_crd():
    report = run([pod(f"p{i}", SLICE, TEAM) for i in range(25)] + [pod("unlabelled", SLICE)])
    reports = policy_reports(report, 1_700_000_000)
    namespaced = next(r for r in reports if r["kind"] == "PolicyReport")
    assert namespaced["metadata"]["namespace"] == "team-a" and namespaced["metadata"]["name"] == "gpu-admission"
    assert namespaced["summary"] == {"pass": 25, "fail": 2, "warn": 0, "error": 0, "skip": 0}
    result = next(r for r in namespaced["results"] if r["rule"] == "require-team-label")
    assert result["resources"] == [
        {"apiVersion": "v1", "kind": "Pod", "namespace": "team-a", "name": "unlabelled", "uid": "uid-unlabelled"}
    ]
    for one in reports:
        jsonschema.validate(one, crd_schema(one["kind"]))


def test_a_report_keeps_at_most_its_limit_of_results_and_says_how_many_it_left_out():
    report = run(
        [pod(f"p{i}", SLICE) for i in range(MAX_RESULTS + 5)], policies=TRAINING.replace("pods: 20", "pods: 5000")
    )
    namespaced = policy_reports(report, 0)[0]
    assert len(namespaced["results"]) == MAX_RESULTS
    assert namespaced["summary"]["fail"] > MAX_RESULTS
    assert int(namespaced["metadata"]["annotations"][TRUNCATED]) > 0


@pytest.fixture
def state(tmp_path):
    items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}, node(allocatable=SEVEN)]
    items += [pod("ok", SLICE, TEAM), pod("unlabelled", SLICE)]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    policies = tmp_path / "training.yaml"
    policies.write_text(TRAINING)
    return path, policies


def test_offline_audit_prints_findings_and_exits_1_on_violations(state, capsys):
    path, policies = state
    assert main(["audit", "--cluster-state", str(path), "--policies", str(policies)]) == 1
    out = capsys.readouterr().out
    assert "FAIL Pod team-a/unlabelled: team-a GPU pods need the label team=a" in out
    assert "2 GPU pods judged, 1 findings" in out
    assert main(["audit", "--cluster-state", str(path), "--policies", str(policies), "-o", "policyreport"]) == 1
    kinds = [d["kind"] for d in yaml.safe_load_all(capsys.readouterr().out)]
    assert kinds == ["PolicyReport", "ClusterPolicyReport"]
    assert main(["audit"]) == 2


def test_offline_audit_finds_env_sources_written_before_the_webhook_was_there(state, capsys):
    """A ConfigMap or Secret whose key envFrom would hand over as NVIDIA_VISIBLE_DEVICES is refused
    when written; one written before (no webhook, no policy then) is found by the audit, its value
    never printed."""
    path, policies = state
    document = yaml.safe_load(path.read_text())
    document["items"] += [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "devices", "namespace": "team-a"},
         "data": {"NVIDIA_VISIBLE_DEVICES": "all"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "team-a"},
         "data": {"TOKEN": "c2VjcmV0"}},
    ]  # fmt: skip
    path.write_text(yaml.safe_dump(document))
    args = ["audit", "--cluster-state", str(path), "--policies", str(policies)]
    assert main([*args, "--env-sources"]) == 1
    out = capsys.readouterr().out
    assert "FAIL ConfigMap team-a/devices: ConfigMap key NVIDIA_VISIBLE_DEVICES grants GPU devices" in out
    assert "2 GPU pods, 2 ConfigMaps and Secrets judged, 2 findings" in out and "c2VjcmV0" not in out
    assert main([*args, "--env-sources", "-o", "policyreport"]) == 1
    (report, _) = yaml.safe_load_all(capsys.readouterr().out)
    flagged = [r["resources"][0] for r in report["results"] if r["rule"] == "security.envFrom"]
    assert flagged == [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "team-a", "name": "devices", "uid": ""}]
    assert report["summary"]["pass"] == 2  # the clean pod and the Secret
    main(args)  # without the flag, env sources are not judged
    assert "ConfigMap" not in capsys.readouterr().out


@pytest.fixture
def kube(kube_on_path):
    fake = kube_on_path
    fake.store("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "namespace": ""}})
    fake.store("nodes", {**node(allocatable=SEVEN), "metadata": {**node()["metadata"], "namespace": ""}})
    for raw in (pod("ok", SLICE, TEAM), pod("unlabelled", SLICE), pod("big", {"nvidia.com/mig-3g.40gb": "1"}, TEAM)):
        fake.put_pod(raw)
    return fake


def snapshot_file(tmp_path):
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps([["training.yaml", TRAINING, None]]))
    return str(path)


def live(tmp_path, *extra):
    return ["audit", "--live", "--write-reports", "--policy-snapshot", snapshot_file(tmp_path), "-o", "summary", *extra]


def test_the_audit_process_writes_reports_then_only_what_changed_and_events_once(kube, tmp_path, capsys):
    assert main(live(tmp_path)) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["judged"] == 3 and summary["reports_written"] == 2 and summary["events"] == 2
    report = kube.get("policyreports", "team-a", "gpu-admission")
    assert report["summary"]["fail"] == 2
    assert {r["rule"] for r in report["results"]} == {"require-team-label", "servable-on-node"}
    events = kube.items("events")
    assert {e["involvedObject"]["name"] for e in events} == {"unlabelled", "big"}
    assert main(live(tmp_path)) == 1
    again = json.loads(capsys.readouterr().out)
    assert again["reports_written"] == 0 and again["events"] == 0, "nothing new: nothing written"
    kube.delete("team-a", "unlabelled", resource="pods")
    assert main(live(tmp_path)) == 1
    assert kube.get("policyreports", "team-a", "gpu-admission")["summary"]["fail"] == 1
    assert all(r.verb in ("list", "get", "create", "update") for r in kube.requests)


def test_events_are_limited_per_run(kube, tmp_path, capsys):
    main(live(tmp_path, "--events", "1"))
    assert json.loads(capsys.readouterr().out)["events"] == 1


def fake_runner(summary):
    calls = []
    called = threading.Event()

    def runner(arguments):
        calls.append(arguments)
        called.set()
        return subprocess.CompletedProcess(arguments, 1, stdout=json.dumps(summary) + "\n", stderr="")

    return runner, calls, called


SUMMARY = {
    "judged": 3,
    "findings": 2,
    "violations": [{"policy": "team-a-training", "rule": "require-team-label", "count": 2}],
    "seconds": 0.1,
}


def test_a_follower_audits_nothing():
    runner, calls, _ = fake_runner(SUMMARY)
    auditor = BackgroundAudit(lambda: [], leading=lambda: False, every=3600, runner=runner)
    assert auditor.tick("policy change") is None and calls == []


def test_the_leader_audits_when_a_node_finishes_a_resplit_and_publishes_the_violations():
    runner, calls, called = fake_runner(SUMMARY)
    auditor = BackgroundAudit(lambda: [], leading=lambda: True, every=3600, runner=runner)
    auditor.start()
    try:
        auditor.node_seen("MODIFIED", node(state="pending"))
        auditor.node_seen("MODIFIED", node(state="success"))
        assert called.wait(5)
        assert calls[0][:3] == ["audit", "--live", "--write-reports"]
    finally:
        auditor.stop()
    text = exposition().decode()
    assert 'gpu_admission_audit_violations{policy="team-a-training",rule="require-team-label"} 2.0' in text


def test_a_node_that_stays_settled_starts_nothing():
    runner, _, _ = fake_runner(SUMMARY)
    auditor = BackgroundAudit(lambda: [], leading=lambda: True, every=3600, runner=runner)
    auditor.node_seen("ADDED", node(state="success"))
    auditor.node_seen("MODIFIED", node(state="success"))
    assert not auditor.pending


def test_the_real_audit_process_runs_against_the_cluster(kube, tmp_path):
    auditor = BackgroundAudit(lambda: [("training.yaml", TRAINING, None)], leading=lambda: True, runner=run_process)
    summary = auditor.run_once("test")
    assert summary is not None and summary["judged"] == 3
    assert kube.get("policyreports", "team-a", "gpu-admission")["summary"]["fail"] == 2


class _ReportsApi:
    """CustomObjectsApi as the API server answers while namespace `ending` is being deleted."""

    seen: list[str] = []

    def __init__(self, api: object) -> None:
        pass

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **kwargs):
        from kubernetes.client.exceptions import ApiException

        if namespace == "ending":
            error = ApiException(status=403, reason="Forbidden")
            error.body = '{"reason":"Forbidden","details":{"causes":[{"reason":"NamespaceTerminating"}]}}'
            raise error
        _ReportsApi.seen.append(namespace)


def test_a_namespace_being_deleted_does_not_fail_the_audit_of_the_others(monkeypatch):
    from webhook.cluster.audit import audit_io

    monkeypatch.setattr(audit_io.client, "CustomObjectsApi", _ReportsApi)
    _ReportsApi.seen = []
    reports = [{"metadata": {"namespace": ns, "name": "gpu-admission"}} for ns in ("a", "ending", "b")]
    assert audit_io.write_reports(object(), reports, {}) == 2
    assert _ReportsApi.seen == ["a", "b"]


class _NoReportsServed:
    """CustomObjectsApi of an API server without the PolicyReport CRDs."""

    def __init__(self, api: object) -> None:
        pass

    def list_cluster_custom_object(self, *args, **kwargs):
        from kubernetes.client.exceptions import ApiException

        raise ApiException(status=404, reason="Not Found")


def test_without_the_policyreport_crds_the_audit_writes_events_only_and_says_why(monkeypatch, capsys):
    from webhook.cli import audit as audit_cli
    from webhook.cluster.audit import audit_io

    monkeypatch.setattr(audit_io.client, "CustomObjectsApi", _NoReportsServed)
    assert audit_io.existing_reports(object()) is None
    monkeypatch.setattr(audit_io, "emit_events", lambda api, findings, limit: 0)
    summary = audit_cli._write(object(), audit_pods(engine_from(), [], KnownCluster(), {}), 20)
    assert summary["reports_written"] == 0
    assert "install the wgpolicyk8s.io CRDs" in summary["reports_missing"]
    assert "PolicyReports" in capsys.readouterr().err
