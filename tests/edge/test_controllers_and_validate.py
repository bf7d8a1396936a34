"""Pod controllers judged by their template, and `gpu-admission validate` as a user runs it."""

import json

import pytest
import yaml

from policies.judge.quota import NoUsage
from tests.support.builders import engine_from, gpu_container, policy
from webhook.cli.main import main

POLICY = policy(
    "team-a",
    """
match: {namespaces: [team-a]}
mig: {gpuModels: [A100-80GB], defaultProfile: 1g.10gb}
rules:
  - {name: require-team-label, expression: "has(object.metadata.labels) && 'team' in object.metadata.labels",
     message: GPU pods need a team label, action: deny}
quota:
  limits: {gpuEquivalents: "1"}
  perPod: {gpuEquivalents: "3/7"}
""",
)


def template(labels=None, annotations=None):
    return {
        "metadata": {"labels": labels or {}, "annotations": annotations or {}},
        "spec": {"containers": [gpu_container()]},
    }


def controller(kind, replicas=2, **template_args):
    body = {"template": template(**template_args)}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        body["replicas"] = replicas
    if kind == "Job":
        body["parallelism"] = replicas
    if kind == "CronJob":
        body = {"schedule": "* * * * *", "jobTemplate": {"spec": {"parallelism": replicas, **body}}}
    api = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "c", "namespace": "team-a"}, "spec": body}


KINDS = ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_controller_kind_is_judged_by_its_pod_template(kind):
    engine = engine_from(POLICY)
    decision = engine.validate(controller(kind), NoUsage())
    assert not decision.allowed
    assert f"{kind} team-a/c" in decision.message and "rule require-team-label" in decision.message
    assert engine.validate(controller(kind, labels={"team": "a"}), NoUsage()).allowed


def test_a_template_whose_replicas_would_exceed_a_quota_gets_a_warning_with_the_numbers():
    engine = engine_from(POLICY)
    decision = engine.validate(controller("Deployment", replicas=9, labels={"team": "a"}), NoUsage())
    assert decision.allowed
    assert any(
        "9 replicas would hold gpuEquivalents 0 + 9x1/7 = 9/7, over 1 (policy team-a)" in w for w in decision.warnings
    )


def test_a_template_over_the_per_pod_cap_is_denied_at_apply_time():
    engine = engine_from(POLICY)
    decision = engine.validate(
        controller("Deployment", labels={"team": "a"}, annotations={"gpu-admission.io/mig-profile": "4g.40gb"}),
        NoUsage(),
    )
    assert not decision.allowed and "per-pod cap" in decision.message


@pytest.fixture
def files(tmp_path):
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "team-a.yaml").write_text(POLICY)

    def write(name, *documents):
        path = tmp_path / name
        path.write_text(yaml.safe_dump_all(documents))
        return str(path)

    return tmp_path, write


def pod_doc(name="p", labels=None, profile="3g.40gb", phase=None):
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": labels or {"team": "a"},
            "annotations": {"gpu-admission.io/mig-profile": profile},
        },
        "spec": {"containers": [gpu_container()]},
    }
    if phase:
        doc["status"] = {"phase": phase}
    return doc


def test_validate_exits_0_when_every_object_is_allowed(files, capsys):
    root, write = files
    assert main(["validate", "-f", write("in.yaml", pod_doc()), "--policies", str(root / "policies")]) == 0
    out = capsys.readouterr().out
    assert "(Pod p): allowed" in out and "nvidia.com/gpu -> nvidia.com/mig-3g.40gb" in out


def test_validate_exits_1_and_prints_the_reason_chain_when_denied(files, capsys):
    root, write = files
    assert (
        main(["validate", "-f", write("in.yaml", pod_doc(labels={"x": "y"})), "--policies", str(root / "policies")])
        == 1
    )
    assert "deny: GPU pods need a team label (policy team-a) [rule require-team-label" in capsys.readouterr().out


def test_validate_counts_cluster_state_and_pods_admitted_earlier_in_the_file(files, capsys):
    root, write = files
    old, done = pod_doc("old"), pod_doc("done", phase="Succeeded")
    for running in (old, done):  # pods in the cluster were mutated when they were created
        running["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-2g.20gb": "1"}}
    state = {"apiVersion": "v1", "kind": "List", "items": [old, done]}
    state_file = write("state.yaml", state)
    incoming = write("in.yaml", pod_doc("a"), pod_doc("b"))
    code = main(
        ["validate", "-f", incoming, "--policies", str(root / "policies"), "--cluster-state", state_file, "-o", "json"]
    )
    assert code == 1
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["allowed"] for r in results] == [True, False]
    denial = [v for v in results[1]["verdicts"] if v["action"] == "deny"][0]
    assert denial == {
        "action": "deny",
        "policy": "team-a",
        "rule": "quota.gpuEquivalents",
        "path": "spec.quota.limits.gpuEquivalents",
        "message": "team-a: gpuEquivalents 5/7 + 3/7 exceeds 1 (policy team-a)",
    }


@pytest.mark.parametrize(
    "document, message",
    [
        (
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}},
            "spec.template: a Deployment needs a pod template",
        ),
    ],
    ids=["controller-without-template"],
)
def test_validate_exits_2_on_bad_input(files, capsys, document, message):
    root, write = files
    assert main(["validate", "-f", write("in.yaml", document), "--policies", str(root / "policies")]) == 2
    assert message in capsys.readouterr().err


def test_validate_exits_2_on_a_bad_policy(files, capsys):
    root, write = files
    (root / "policies" / "broken.yaml").write_text(POLICY.replace("team-a", "broken").replace("1g.10gb", "1g.99gb"))
    assert main(["validate", "-f", write("in.yaml", pod_doc()), "--policies", str(root / "policies")]) == 2
    assert "broken.yaml" in capsys.readouterr().err
