"""What a replica keeps of its pods is enough to charge them under a new policy set or new
namespace labels without listing them again; and what must be said once for the whole cluster
(policy status Events) is said by one replica, the leader."""

from __future__ import annotations

import pytest

from tests.support.builders import policy
from tests.support.cluster import NS, TEAM_QUOTA, Replica, eventually, namespace, slice_pod, start
from tests.support.kube_fake import FakeKube
from webhook.cluster import wiring
from webhook.events import SourceProblems


def pod_lists(kube: FakeKube, replica: Replica) -> int:
    return len(kube.requests_by(f"({replica.identity})", "list", "pods"))


def test_a_new_limit_is_charged_from_the_pods_already_counted_without_listing_them(kube, replicas):
    kube.put(NS, "quota", {"q.yaml": TEAM_QUOTA})
    for i in range(3):
        kube.put_pod(slice_pod(f"old{i}"))
    replica = start(kube, replicas)
    assert replica.quota_pods("team-quota", "team-a") == 3 and pod_lists(kube, replica) == 1
    assert not replica.validate(slice_pod("new")).allowed
    kube.put(NS, "quota", {"q.yaml": TEAM_QUOTA.replace("pods: 3", "pods: 4")})
    assert eventually(lambda: replica.validate(slice_pod("new"), dry_run=True).allowed)
    assert replica.quota_pods("team-quota", "team-a") == 3 and pod_lists(kube, replica) == 1


def test_a_new_policy_matching_on_what_the_counters_keep_is_charged_without_a_list(kube, replicas):
    kube.store("namespaces", namespace("team-a", tier="gold"))
    kube.put(NS, "quota", {"q.yaml": TEAM_QUOTA})
    kube.put_pod(slice_pod("a0"))
    kube.put_pod(slice_pod("a1"))
    replica = start(kube, replicas)
    gold = policy("gold", "match: {namespaceSelector: {matchLabels: {tier: gold}}}\nquota: {limits: {pods: 10}}")
    kube.put(NS, "gold", {"g.yaml": gold})
    assert eventually(lambda: replica.holder.engine.policy_set.by_name("gold") is not None)
    assert eventually(lambda: replica.quota_pods("gold", "team-a") == 2)
    assert pod_lists(kube, replica) == 1


def test_a_policy_selecting_on_a_label_the_counters_did_not_keep_lists_the_pods_once(kube, replicas):
    kube.put(NS, "quota", {"q.yaml": TEAM_QUOTA})
    kube.put_pod(slice_pod("labelled", tier="gold"))
    kube.put_pod(slice_pod("plain"))
    replica = start(kube, replicas)
    narrowed = TEAM_QUOTA.replace("match: {namespaces: [team-a]}", "match: {podSelector: {matchLabels: {tier: gold}}}")
    kube.put(NS, "quota", {"q.yaml": narrowed})
    assert eventually(lambda: replica.quota_pods("team-quota", "team-a") == 1)
    assert pod_lists(kube, replica) == 2
    kube.put(NS, "quota", {"q.yaml": narrowed.replace("pods: 3", "pods: 5")})  # the label is kept now
    assert eventually(lambda: replica.holder.engine.policy_set.by_name("team-quota").quota.limits.pods == 5)
    assert replica.quota_pods("team-quota", "team-a") == 1 and pod_lists(kube, replica) == 2


def test_a_condition_outcome_is_kept_so_a_limit_change_under_it_needs_no_list(kube, replicas):
    conditioned = policy(
        "labelled-only",
        "match:\n  condition: \"has(object.metadata.labels) && object.metadata.labels['tier'] == 'gold'\"\n"
        "quota: {limits: {pods: 3}}",
    )
    kube.put(NS, "quota", {"q.yaml": conditioned})
    kube.put_pod(slice_pod("labelled", tier="gold"))
    kube.put_pod(slice_pod("plain"))
    replica = start(kube, replicas)
    assert replica.quota_pods("labelled-only", "team-a") == 1
    kube.put(NS, "quota", {"q.yaml": conditioned.replace("pods: 3", "pods: 1")})
    assert eventually(lambda: not replica.validate(slice_pod("another", tier="gold"), dry_run=True).allowed)
    assert replica.quota_pods("labelled-only", "team-a") == 1 and pod_lists(kube, replica) == 1


def test_pods_follow_their_namespace_into_and_out_of_a_namespace_selector(kube, replicas):
    gold = policy("gold", "match: {namespaceSelector: {matchLabels: {tier: gold}}}\nquota: {limits: {pods: 10}}")
    kube.put(NS, "gold", {"g.yaml": gold})
    kube.store("namespaces", namespace("team-a", tier="silver"))
    kube.put_pod(slice_pod("a0"))
    replica = start(kube, replicas)
    assert replica.quota_pods("gold", "team-a") == 0
    kube.store("namespaces", namespace("team-a", tier="gold"))
    assert eventually(lambda: replica.quota_pods("gold", "team-a") == 1)
    kube.store("namespaces", namespace("team-a", tier="silver"))
    assert eventually(lambda: replica.quota_pods("gold", "team-a") == 0)
    assert pod_lists(kube, replica) == 1


def rejected(kube: FakeKube) -> list[dict]:
    return [e for e in kube.items("events") if e["reason"] == "PolicyRejected"]


def test_three_replicas_say_a_bad_policy_once_and_its_fix_once(kube, replicas):
    trio = [start(kube, replicas) for _ in range(3)]
    assert eventually(lambda: sum(r.leadership.leading for r in trio) == 1)
    kube.put(NS, "team", {"a.yaml": policy("team", "mig: {defaultProfile: 1g.11gb}")})
    assert eventually(lambda: all(r.store.problems_of("configmap/gpu-admission/team") for r in trio))
    assert kube.wait_for(lambda: len(rejected(kube)) == 1)
    kube.put(NS, "team", {"a.yaml": policy("team", "mig: {defaultProfile: 1g.10gb}")})
    assert kube.wait_for(lambda: any(e["reason"] == "PolicyLoaded" for e in kube.items("events")))
    assert eventually(lambda: all(not r.store.problems_of("configmap/gpu-admission/team") for r in trio))
    assert len(rejected(kube)) == 1 and [e["reason"] for e in kube.items("events")].count("PolicyLoaded") == 1
    annotation_patches = [w for w in kube.writes if w[:2] == ("PATCH", "configmaps")]
    assert len(annotation_patches) <= 3  # the leader's: first sight, problem, fix


@pytest.fixture
def short_status_lease(monkeypatch):
    # Short, so a leader that goes is replaced within a test's wait; not so short that a leader
    # renewing every third of it (one second) loses it while a loaded machine runs two replicas of
    # ten watches each (1.5 s did, twice in CI runs once DRA classes and slices were watched too).
    monkeypatch.setattr(wiring, "STATUS_LEASE_SECONDS", 3.0)


def test_when_the_leader_goes_the_next_replica_reports_what_it_had_not(kube, replicas, short_status_lease):
    first = start(kube, replicas)
    assert eventually(lambda: first.leadership.leading)
    second = start(kube, replicas)
    first.stop()  # gives the Lease up on the way out
    replicas.remove(first)
    assert eventually(lambda: second.leadership.leading, timeout=5)
    kube.put(NS, "team", {"a.yaml": policy("team", "mig: {defaultProfile: 1g.11gb}")})
    assert kube.wait_for(lambda: len(rejected(kube)) == 1)
    assert rejected(kube)[0]["reportingInstance"] == second.identity


def test_a_replica_that_becomes_leader_tells_a_configmap_what_no_one_had(kube, replicas, short_status_lease):
    """A bad ConfigMap seen while another replica led, whose leader went before writing: the new
    leader annotates it and says it once."""
    first = start(kube, replicas)
    assert eventually(lambda: first.leadership.leading)
    second = start(kube, replicas)
    first.holder.events.silence(SourceProblems)  # the leader will write nothing more ...
    kube.put(NS, "team", {"a.yaml": policy("team", "mig: {defaultProfile: 1g.11gb}")})
    assert eventually(lambda: second.store.problems_of("configmap/gpu-admission/team"))
    assert not rejected(kube)  # ... and the follower does not write
    first.leadership.stop()  # the leader goes, its Lease given up
    assert kube.wait_for(lambda: len(rejected(kube)) == 1, timeout=5)
    assert "gpu-admission.io/load-errors" in kube.get("configmaps", NS, "team")["metadata"]["annotations"]
    assert rejected(kube)[0]["reportingInstance"] == second.identity
