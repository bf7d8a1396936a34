"""The webhook connected to a cluster, through the real kubernetes client against an in-process
API server: pods, namespaces and nodes watched, readiness, status Events, namespaced policies,
namespaceSelector, free-capacity preference, and strict quotas shared by replicas."""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client

from tests.support.builders import Calls, gpu_container, pod, policy
from tests.support.cluster import (
    NS,
    TEAM_QUOTA,
    WATCHED,
    Replica,
    eventually,
    namespace,
    node,
    patch_of,
    slice_pod,
    start,
)
from webhook.cluster.api.identity import api_client
from webhook.cluster.api.policy_status import LOAD_ERRORS_ANNOTATION
from webhook.cluster.wiring import cluster_link, connect
from webhook.sources.configmaps import LAST_GOOD_ANNOTATION
from webhook.sources.store import PolicyStore
from webhook.state import AdmissionSettings, EngineHolder


def test_a_replica_is_ready_only_once_policies_pods_namespaces_and_nodes_have_listed(kube, replicas):
    kube.put(NS, "quota", {"q.yaml": TEAM_QUOTA})
    kube.store("namespaces", namespace("team-a"))
    replica = Replica(kube)
    replicas.append(replica)
    replica.wait_ready()
    assert [w.name for w in replica.watches] == list(WATCHED)  # pods last: listed once the rest has


def test_pods_are_listed_in_pages_and_feed_the_quota_counters(kube, replicas):
    kube.put(NS, "quota", {"q.yaml": TEAM_QUOTA})
    for i in range(5):
        kube.put_pod(slice_pod(f"old{i}"))
    replica = start(kube, replicas, page=2)
    assert replica.quota_pods("team-quota", "team-a") == 5 and kube.pages >= 3
    kube.delete("team-a", "old0", resource="pods")
    kube.delete("team-a", "old1", resource="pods")
    assert eventually(lambda: replica.quota_pods("team-quota", "team-a") == 3)
    assert not replica.validate(slice_pod("new")).allowed


def test_a_new_policy_set_recounts_the_pods_under_the_policies_now_in_force(kube, replicas):
    kube.put(NS, "quota", {"q.yaml": TEAM_QUOTA})
    kube.put_pod(slice_pod("labelled", tier="gold"))
    kube.put_pod(slice_pod("plain"))
    replica = start(kube, replicas)
    assert replica.quota_pods("team-quota", "team-a") == 2
    narrowed = TEAM_QUOTA.replace("match: {namespaces: [team-a]}", "match: {podSelector: {matchLabels: {tier: gold}}}")
    kube.put(NS, "quota", {"q.yaml": narrowed})
    assert eventually(lambda: replica.holder.engine.policy_set.by_name("team-quota").match.pod_selector is not None)
    assert eventually(lambda: replica.quota_pods("team-quota", "team-a") == 1)


def test_a_bad_configmap_gets_a_warning_event_and_an_annotation_that_go_once_it_is_fixed(kube, replicas):
    kube.put(NS, "team", {"a.yaml": policy("team", "mig: {defaultProfile: 1g.10gb}")})
    replica = start(kube, replicas)
    kube.put(NS, "team", {"a.yaml": policy("team", "mig: {defaultProfile: 1g.11gb}")})
    assert kube.wait_for(lambda: any(e["reason"] == "PolicyRejected" for e in kube.items("events")))
    event = next(e for e in kube.items("events") if e["reason"] == "PolicyRejected")
    assert event["type"] == "Warning" and event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "team",
        "namespace": NS,
    }
    assert "spec.mig.defaultProfile" in event["message"] and "1g.11gb" in event["message"]
    annotations = kube.get("configmaps", NS, "team")["metadata"]["annotations"]
    assert "configmap/gpu-admission/team/a.yaml:" in annotations[LOAD_ERRORS_ANNOTATION]
    assert replica.holder.engine.policy_set.by_name("team").mig.default_profile == "1g.10gb"
    kube.put(NS, "team", {"a.yaml": policy("team", "mig: {defaultProfile: 1g.20gb}")})
    assert kube.wait_for(lambda: any(e["reason"] == "PolicyLoaded" for e in kube.items("events")))
    assert LOAD_ERRORS_ANNOTATION not in (kube.get("configmaps", NS, "team")["metadata"].get("annotations") or {})


NAMESPACED = """
match: {namespaces: [team-b]}
mig: {gpuModels: [A100-80GB], defaultProfile: 7g.80gb}
quota: {limits: {pods: 1}}
"""


def test_namespaced_policies_match_only_their_own_namespace_and_yield_to_cluster_policies(kube, replicas):
    kube.put(NS, "cluster", {"c.yaml": policy("cluster", "mig: {gpuModels: [A100-80GB], defaultProfile: 1g.10gb}")})
    kube.put("team-b", "own", {"o.yaml": policy("limits", NAMESPACED.replace("team-b", "team-b"))})
    kube.put("team-c", "overreach", {"o.yaml": policy("limits", NAMESPACED)})
    replica = start(kube, replicas, all_namespaces=True)
    policies = replica.holder.engine.policy_set
    assert [p.name for p in policies.policies] == ["cluster", "team-b/limits"]
    assert "may match only team-c" in replica.store.problems_of("configmap/team-c/overreach")[0].message
    # MIG comes from the cluster policy even where the namespaced one matches with a higher priority ...
    patch = patch_of(replica.mutate(pod(gpu_container(), namespace="team-b")))
    assert any(op["path"].endswith("nvidia.com~1mig-1g.10gb") for op in patch)
    # ... while its quota holds in team-b only.
    assert replica.validate(slice_pod("first", namespace="team-b")).allowed
    assert not replica.validate(slice_pod("second", namespace="team-b")).allowed
    # team-c's policy never loaded: it fails closed in team-c, naming itself, and nowhere else (#41).
    refused = replica.validate(slice_pod("elsewhere", namespace="team-c"))
    assert not refused.allowed and "policy team-c/limits is out of force" in refused.message


SELECTED = policy(
    "gold-only",
    """
match: {namespaceSelector: {matchLabels: {tier: gold}}}
rules:
  - {name: never, expression: "false", message: gold namespaces take no GPU pods today, action: deny}
""",
)


def test_namespace_selector_follows_the_namespace_labels_from_the_watch(kube, replicas):
    kube.put(NS, "sel", {"s.yaml": SELECTED})
    kube.store("namespaces", namespace("team-a", tier="gold"))
    kube.store("namespaces", namespace("team-b", tier="silver"))
    replica = start(kube, replicas)
    assert not replica.validate(slice_pod("p", namespace="team-a")).allowed
    assert replica.validate(slice_pod("p", namespace="team-b")).allowed
    kube.store("namespaces", namespace("team-b", tier="gold"))
    assert eventually(lambda: not replica.validate(slice_pod("q", namespace="team-b")).allowed)


def test_a_namespace_the_watch_has_not_shown_yet_is_read_from_the_api_server(kube, replicas):
    kube.put(NS, "sel", {"s.yaml": SELECTED})
    replica = start(kube, replicas)
    for watch in replica.watches:
        if watch.name == "namespaces":
            watch.stop()  # the watch falls silent: only a read can know the new namespace
    kube.store("namespaces", namespace("fresh", tier="gold"))
    assert not replica.validate(slice_pod("p", namespace="fresh")).allowed


TWO_MODELS = policy(
    "inference",
    """
match: {namespaces: [team-a]}
mig: {gpuModels: [H100-80GB, A100-40GB]}
""",
)


def test_where_several_models_or_profiles_fit_the_one_with_free_slices_is_picked_and_said(kube, replicas):
    kube.put(NS, "inf", {"i.yaml": TWO_MODELS})
    kube.store("nodes", node("h100", "NVIDIA-H100-80GB-HBM3", {"mig-1g.20gb": "1"}))
    kube.store("nodes", node("a100", "NVIDIA-A100-SXM4-40GB", {"mig-3g.20gb": "2"}))
    busy = slice_pod("busy", node="h100")
    busy["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-1g.20gb": "1"}
    kube.put_pod(busy)
    replica = start(kube, replicas)
    wanted = pod(gpu_container(), namespace="team-a", annotations={"gpu-memory": "15Gi"})
    patch = patch_of(replica.mutate(wanted))
    added = [op["path"] for op in patch if op["op"] == "add" and "mig-" in op["path"]]
    assert added == ["/spec/containers/0/resources/limits/nvidia.com~1mig-3g.20gb"]
    record = next(op["value"] for op in patch if op["path"].endswith("mutated"))
    assert "free capacity on A100-40GB" in record
    kube.delete("team-a", "busy", resource="pods")
    assert eventually(lambda: "mig-1g.20gb" in json.dumps(patch_of(replica.mutate(wanted))))


STRICT = policy(
    "strict-team",
    """
match: {namespaces: [team-a]}
mig: {gpuModels: [A100-80GB]}
quota: {limits: {pods: 5}, consistency: strict}
""",
)


def test_two_replicas_sharing_a_strict_quota_never_admit_more_than_it_allows(kube, replicas):
    kube.put(NS, "strict", {"s.yaml": STRICT})
    first, second = start(kube, replicas), start(kube, replicas)
    results: list[bool] = []
    barrier = threading.Barrier(12)

    def admit(replica: Replica, i: int) -> None:
        barrier.wait()
        results.append(replica.validate(slice_pod(f"p{i}")).allowed)

    threads = [threading.Thread(target=admit, args=(first if i % 2 else second, i)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 5
    leases = [lease for lease in kube.items("leases") if lease["metadata"]["name"] != "gpu-admission-status"]
    assert len(leases) == 1 and leases[0]["metadata"]["annotations"]["gpu-admission.io/policy"] == "strict-team"


def test_a_replica_with_a_stale_view_of_the_lease_is_refused_reads_it_again_and_judges_again(kube, replicas):
    kube.put(NS, "strict", {"s.yaml": STRICT})
    first, second = start(kube, replicas), start(kube, replicas)
    assert first.validate(slice_pod("p0")).allowed  # first now holds the Lease as it wrote it
    assert all(second.validate(slice_pod(f"p{i}")).allowed for i in range(1, 5))
    assert not first.validate(slice_pod("p5")).allowed  # its write at the old resourceVersion fails
    assert first.holder.budgets.shared.leases.conflicts == 1


def test_a_strict_quota_whose_lease_cannot_be_reached_denies_and_says_why(kube, replicas):
    kube.put(NS, "strict", {"s.yaml": STRICT})
    replica = start(kube, replicas)
    kube.stop()
    decision = replica.validate(slice_pod("p0"))
    assert not decision.allowed and "strict quota ledger unreachable, denied to be safe" in decision.message


def test_strict_reservations_give_way_to_the_pods_once_they_are_watched(kube, replicas):
    kube.put(NS, "strict", {"s.yaml": STRICT})
    first, second = start(kube, replicas), start(kube, replicas)
    for i in range(3):
        admitted = slice_pod(f"p{i}")
        assert first.validate(admitted).allowed
        kube.put_pod(admitted)
    assert eventually(lambda: second.quota_pods("strict-team", "team-a") == 3)
    assert eventually(lambda: first.quota_pods("strict-team", "team-a") == 3)
    assert second.validate(slice_pod("p3")).allowed and second.validate(slice_pod("p4")).allowed
    assert not first.validate(slice_pod("p5")).allowed


def test_a_pod_that_finished_within_the_reservation_window_frees_its_place_at_once(kube, replicas):
    kube.put(NS, "strict", {"s.yaml": STRICT})
    first, second = start(kube, replicas), start(kube, replicas)
    for i in range(5):  # short jobs: admitted, created, done, all within the 30 s reservation TTL
        admitted = slice_pod(f"job{i}")
        assert first.validate(admitted).allowed
        kube.put_pod({**admitted, "status": {"phase": "Succeeded"}})
    assert eventually(lambda: second.validate(slice_pod("next"), dry_run=True).allowed)
    assert all(second.validate(slice_pod(f"n{i}")).allowed for i in range(5))
    assert not second.validate(slice_pod("n5")).allowed  # the budget still holds


def test_dry_run_under_a_strict_quota_writes_nothing(kube, replicas):
    kube.put(NS, "strict", {"s.yaml": STRICT})
    replica = start(kube, replicas)
    assert all(replica.validate(slice_pod(f"p{i}"), dry_run=True).allowed for i in range(8))
    assert not [w for w in kube.writes if w[1] == "leases" and w[2] != "gpu-admission-status"]


def test_a_relist_asked_for_in_the_middle_of_a_long_watch_starts_at_once(kube, replicas):
    kube.put(NS, "quota", {"q.yaml": TEAM_QUOTA})
    api = api_client(client.Configuration(host=f"http://127.0.0.1:{kube.port}"))
    holder = EngineHolder(AdmissionSettings(policy_namespace=NS), link=cluster_link(api, NS, "replica-1"))
    store = PolicyStore(holder.swap, holder.events)
    connected = connect(holder.view, holder.gates, store, NS, api, "replica-1", watch_seconds=300)
    try:
        pods = connected.watches[-1]
        assert pods.synced.wait(10)
        relisted = pods.relists
        pods.relist()
        assert eventually(lambda: pods.relists == relisted + 1, timeout=5)
    finally:
        connected.stop()


def test_a_resourcequota_on_whole_gpus_that_the_rewrite_sidesteps_is_warned_about(kube, replicas):
    kube.put(NS, "p", {"p.yaml": policy("p", "mig: {gpuModels: [A100-80GB], defaultProfile: 1g.10gb}")})
    hard = {"requests.nvidia.com/gpu": "4"}
    quota = {"metadata": {"name": "gpus", "namespace": "team-a"}, "spec": {"hard": hard}}
    kube.store("resourcequotas", {"apiVersion": "v1", "kind": "ResourceQuota", **quota})
    replica = start(kube, replicas)
    warnings = replica.mutate(pod(gpu_container(), namespace="team-a")).warnings
    assert "ResourceQuota gpus counts requests.nvidia.com/gpu, not this pod's nvidia.com/mig-1g.10gb" in warnings
    assert not replica.mutate(pod(gpu_container(), namespace="team-b")).warnings


def test_a_poisoned_configmap_at_start_leaves_the_replica_ready_and_fails_closed_naming_it(kube, replicas):
    """A policy that never loaded (no version here, none persisted in the cluster) is out of force:
    the replica is ready and says so, and the pods it could hold are denied naming it, rather
    than admitted as if it did not exist (#41)."""
    kube.put(NS, "good", {"g.yaml": policy("good")})
    kube.put(NS, "poison", {"p.yaml": policy("poison", 'runtime: {shmSize: "NaN"}')})
    replica = start(kube, replicas)  # ready: every watch has listed
    assert [p.name for p in replica.holder.engine.policy_set.policies] == ["good"]
    assert kube.wait_for(lambda: any(e["reason"] == "PolicyRejected" for e in kube.items("events")))
    annotations = kube.get("configmaps", NS, "poison")["metadata"]["annotations"]
    assert "spec.runtime.shmSize" in annotations[LOAD_ERRORS_ANNOTATION]
    answer = replica.validate(slice_pod("p", namespace="team-a"))
    assert not answer.allowed and "policy poison is out of force" in answer.message
    why_not, worth_knowing = replica.holder.readiness()
    assert not why_not and "out of force (failing closed): poison" in worth_knowing


def test_a_broken_policy_a_fresh_replica_meets_keeps_the_version_persisted_in_the_cluster(kube, replicas):
    """#41: a broken ConfigMap slipped in while no replica answered; after a restart the replica had
    no last good version, and the team's caps were gone. The leader persists each ConfigMap's
    texts on it once they all load; a fresh replica meeting it broken keeps that version."""
    capped = policy("capped", "match: {namespaces: [team-a]}\nquota: {perPod: {gpuEquivalents: '1/7'}}")
    kube.put(NS, "caps", {"c.yaml": capped})
    first = start(kube, replicas)
    assert kube.wait_for(
        lambda: LAST_GOOD_ANNOTATION in (kube.get("configmaps", NS, "caps")["metadata"].get("annotations") or {})
    )
    whole = pod(gpu_container(), namespace="team-a")
    assert not first.validate(whole).allowed
    first.stop()
    replicas.remove(first)
    broken = kube.get("configmaps", NS, "caps")
    broken["data"] = {"c.yaml": capped.replace("quota:", "quota: {limits: {gpus: x}}\nextra:")}
    kube.store("configmaps", broken)
    fresh = start(kube, replicas)
    assert [p.name for p in fresh.holder.engine.policy_set.policies] == ["capped"]
    assert not fresh.holder.engine.policy_set.lapsed
    refused = fresh.validate(whole)
    assert not refused.allowed and "per-pod cap" in refused.message  # the persisted caps, still in force
    assert fresh.store.problems_of(f"configmap/{NS}/caps")  # and the broken text is still told


def test_a_handler_that_fails_on_a_list_is_logged_as_such_and_readiness_does_not_wait_on_it(
    kube, replicas, caplog, monkeypatch
):
    from webhook.cluster.quota.counting.pod_counting import PodCounting

    real, calls = PodCounting.replace_all, []

    def flaky(self, pods):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a handler bug")
        real(self, pods)

    monkeypatch.setattr(PodCounting, "replace_all", flaky)
    lists = Calls(monkeypatch, PodCounting, "replace_all")
    start(kube, replicas)
    assert any("watch handler failed on a list" in r.getMessage() for r in caplog.records)
    assert not any("API server unreachable" in r.getMessage() for r in caplog.records)
    assert lists.wait_for(lambda: len(calls) >= 2)  # listed again after a backoff


def test_a_watch_whose_thread_stops_makes_readiness_say_so(kube, replicas):
    replica = start(kube, replicas)
    nodes = next(w for w in replica.watches if w.name == "nodes")
    nodes.error = "stopped: SystemError: a bug"  # as _guarded_run records it
    waiting, _ = replica.holder.readiness()
    assert waiting == "watch nodes stopped: SystemError: a bug" and not replica.holder.ready


@pytest.mark.parametrize("consistency", ["local", "strict"])
def test_a_forged_review_holds_a_budget_for_seconds_and_a_real_pod_keeps_its_own(kube, replicas, consistency):
    kube.put(
        NS,
        "one",
        {
            "o.yaml": policy(
                "one", f"match: {{namespaces: [team-a]}}\nquota: {{limits: {{pods: 1}}, consistency: {consistency}}}"
            )
        },
    )
    replica = start(kube, replicas, confirm_after=0.3)  # seconds the watch has to show a pod (5 as shipped)
    assert replica.validate(slice_pod("forged")).allowed  # a review for a pod nobody creates
    assert not replica.validate(slice_pod("real")).allowed  # the budget is held meanwhile
    deadline = time.monotonic() + 10
    while replica.holder.view.counting.reserved_pods() and time.monotonic() < deadline:
        time.sleep(0.1)  # the sweep runs every second once the pod watch is live
    assert replica.holder.view.counting.reserved_pods() == 0
    real = slice_pod("real")
    assert replica.validate(real).allowed
    kube.put_pod(real)  # created: its reservation gives way to the watched pod, not to the sweep
    assert kube.wait_for(lambda: replica.quota_pods("one", "team-a") == 1)
    assert not replica.validate(slice_pod("third")).allowed
