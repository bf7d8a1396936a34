"""A tenant's view of their quota: `gpu-admission quota` from a cluster-state file and from the
live cluster (the in-process fake API server, through a kubeconfig), and the quota metrics."""

import json
import time
from pathlib import Path

import pytest
import yaml

from policies.judge.usage import Usage
from tests.support.builders import engine_from
from tests.support.server_harness import holder_of
from webhook.cli.main import main
from webhook.cluster.quota.leases.lease_entries import LEDGER_LABEL, RESERVATIONS, Entry
from webhook.metrics import exposition

EXAMPLES = Path(__file__).parents[2] / "examples" / "policies"
TRAINING = EXAMPLES / "training-quota.yaml"


def gpu_pod(name, namespace="team-a", resources=None, uid=None):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "labels": {"team": "a"}},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "m", "image": "x", "resources": {"limits": resources or {"nvidia.com/gpu": 1}}}],
        },
        "status": {"phase": "Running"},
    }


@pytest.fixture
def state(tmp_path):
    items = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a-dev"}},
        gpu_pod("a1", resources={"nvidia.com/mig-3g.40gb": 1}),
        gpu_pod("a2"),
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_each_limit_shows_used_reserved_left_and_a_bar(state, capsys):
    assert main(["quota", "--cluster-state", str(state), "--policies", str(TRAINING)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["POLICY", "SCOPE", "LIMIT", "ON", "USED", "RESERVED", "LIMIT", "LEFT"]
    equivalents = next(line for line in lines if "gpuEquivalents" in line and "per pod" not in line)
    assert "10/7 (1.43)" in equivalents and "18/7 (2.57)" in equivalents
    assert "[#######.............]" in equivalents
    pods = next(line for line in lines if " pods " in line)
    assert pods.split()[3:7] == ["2", "0", "20", "18"]
    assert any("per pod gpuEquivalents" in line for line in lines)


def test_a_namespace_asked_for_shows_its_budget_even_when_empty(state, capsys):
    assert (
        main(["quota", "--cluster-state", str(state), "--policies", str(TRAINING), "-n", "team-a-dev", "-o", "json"])
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert {r["scope"] for r in rows} == {"team-a-dev"}
    assert next(r for r in rows if r["dimension"] == "gpuEquivalents") == {
        "policy": "team-a-training",
        "scope": "team-a-dev",
        "dimension": "gpuEquivalents",
        "used": "0",
        "reserved": "0",
        "limit": "4",
        "left": "4",
    }
    assert main(["quota", "--cluster-state", str(state), "--policies", str(TRAINING), "-n", "web"]) == 0
    assert "no quota in web" in capsys.readouterr().err


@pytest.fixture
def kube(kube_on_path):
    return kube_on_path


def live_cluster(kube):
    kube.store("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "namespace": ""}})
    kube.put(
        "gpu-admission", "policies", {"training.yaml": TRAINING.read_text()}, labels={"gpu-admission.io/policy": "true"}
    )
    kube.put_pod(gpu_pod("a1"))
    pending = Entry("uid-new", time.time() + 30, Usage(pods=1, gpus=1, gpu_equivalents=1))
    seen = Entry("uid-a1", time.time() + 30, Usage(pods=1, gpus=1, gpu_equivalents=1))
    kube.store(
        "leases",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": "gpu-admission-quota-team-a-training-x",
                "namespace": "gpu-admission",
                "labels": {LEDGER_LABEL: "true"},
                "annotations": {
                    "gpu-admission.io/policy": "team-a-training",
                    "gpu-admission.io/scope": "team-a",
                    RESERVATIONS: json.dumps([pending.to_json(), seen.to_json()]),
                },
            },
            "spec": {},
        },
    )


def test_the_live_cluster_is_read_with_policies_and_reservations(kube, capsys):
    live_cluster(kube)
    assert main(["quota", "-n", "team-a", "-o", "json"]) == 0
    rows = {r["dimension"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["pods"]["used"] == "1" and rows["pods"]["reserved"] == "1" and rows["pods"]["left"] == "18"
    assert rows["gpuEquivalents"]["reserved"] == "1", "a reservation whose pod is counted is not counted twice"
    assert {r.verb for r in kube.requests} == {"list"}, "read-only, and lists only"


def test_what_the_kubeconfig_may_not_read_is_said_and_left_out(kube, capsys):
    live_cluster(kube)
    kube.forbidden |= {"namespaces", "leases"}
    assert main(["quota", "-n", "team-a"]) == 0
    out, err = capsys.readouterr()
    assert "note: namespaces: 403" in err and "note: strict-quota Leases in gpu-admission: 403" in err
    assert "team-a-training" in out


def test_the_replica_exports_the_quota_view_as_metrics():
    holder = holder_of(engine_from(TRAINING.read_text()))
    holder.view.counting.replace_all([gpu_pod("a1"), gpu_pod("a2", resources={"nvidia.com/mig-3g.40gb": 1})])
    text = exposition(holder.quota_metrics()).decode()
    labels = 'dimension="gpuEquivalents",policy="team-a-training",scope="team-a"'
    assert f"gpu_admission_quota_used{{{labels}}} 1.4285714285714286" in text
    assert f"gpu_admission_quota_limit{{{labels}}} 4.0" in text
    assert f"gpu_admission_quota_reserved{{{labels}}} 0.0" in text
    assert 'gpu_admission_quota_limit{dimension="per pod gpuEquivalents"' in text


def test_the_grafana_dashboard_plots_the_metrics_the_replica_exports():
    import re

    dashboard = json.loads((Path(__file__).parents[2] / "deploy/grafana/gpu-admission-quotas.json").read_text())
    holder = holder_of(engine_from(TRAINING.read_text()))
    holder.view.counting.replace_all([gpu_pod("a1")])
    exported = set(re.findall(r"^(gpu_admission_quota_\w+)\{", exposition(holder.quota_metrics()).decode(), re.M))
    queried = {
        m for p in dashboard["panels"] for t in p["targets"] for m in re.findall(r"gpu_admission_\w+", t["expr"])
    }
    assert queried and queried <= exported
    assert {"policy", "namespace", "dimension"} <= {v["name"] for v in dashboard["templating"]["list"]}


def test_the_webhook_health_dashboard_plots_only_metrics_the_webhook_exports():
    """#41: the one dashboard was quota only. The health one: replicas, decisions (dry runs apart),
    latency, errors, connections, and policies in and out of force."""
    import re

    from prometheus_client import REGISTRY

    import webhook.metrics  # noqa: F401  (registers them)

    dashboard = json.loads((Path(__file__).parents[2] / "deploy/grafana/gpu-admission-webhook.json").read_text())
    exported = {m.name for m in REGISTRY.collect()}
    queried = {
        re.sub(r"_(total|bucket)$", "", m)
        for p in dashboard["panels"]
        for t in p["targets"]
        for m in re.findall(r"gpu_admission_\w+", t["expr"])
    }
    assert {"gpu_admission_policies_out_of_force", "gpu_admission_reviews"} <= queried <= exported
    assert any('dry_run="true"' in t["expr"] for p in dashboard["panels"] for t in p["targets"])
