"""A replica watches PodGroups (scheduling.k8s.io, each version the API server serves) for the claims
each makes for all its pods: a running gang whose pods share their group's claim is charged it
once, and once the group is gone (its claim with it, in the cluster) each pod is charged its own
template again; an API server without PodGroups leaves the replica ready."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from tests.support.builders import Calls, policy
from tests.support.cluster import NS, Replica, start
from tests.support.dra import claim, claim_spec, exactly, group_pod, pod_group
from tests.support.kube_fake import FakeKube
from webhook.cluster.quota.counting.pod_counting import PodCounting

BUDGET = policy("gang-budget", 'match: {namespaces: [ml]}\nquota: {limits: {gpuEquivalents: "4"}}')


def running(name: str) -> dict[str, Any]:
    made = group_pod(name, "gang", {"gpus": "two-gpus"})
    made["metadata"]["uid"] = f"uid-{name}"
    made["spec"]["nodeName"] = "node-1"
    return made


def test_a_running_gang_is_charged_its_groups_claim_once_and_each_pod_its_own_once_the_group_is_gone(
    kube: FakeKube, replicas, monkeypatch
):
    relists = Calls(monkeypatch, PodCounting, "replace_all")
    kube.put(NS, "budget", {"b.yaml": BUDGET})
    kube.store("resourceclaimtemplates", claim("two-gpus", "ml", claim_spec(exactly("gpu.nvidia.com", 2)), True))
    kube.store("podgroups", pod_group("gang", {"gpus": "two-gpus"}))
    for name in ("a", "b"):
        kube.put_pod(running(name))
    replica: Replica = start(kube, replicas)
    budget = replica.holder.engine.policy_set.by_name("gang-budget")
    assert replica.holder.budgets.usage(budget, "ml").gpu_equivalents == 2
    assert replica.validate(group_pod("c", "gang", {"gpus": "two-gpus"}), dry_run=True).allowed  # 2 of 4, still
    listed = relists.count
    kube.delete("ml", "gang", "podgroups")
    assert relists.wait_for(lambda: relists.count > listed)  # the pods charged again
    assert replica.holder.budgets.usage(budget, "ml").gpu_equivalents == Fraction(4)
    denied = replica.validate(group_pod("c", "gang", {"gpus": "two-gpus"}), dry_run=True)
    assert not denied.allowed and "gpuEquivalents 4 + 2 exceeds 4" in denied.message


def test_an_api_server_without_pod_groups_leaves_the_replica_ready(kube: FakeKube, replicas):
    kube.unserved |= {"podgroups"}
    kube.put(NS, "budget", {"b.yaml": BUDGET})
    replica: Replica = start(kube, replicas)
    assert replica.holder.ready
