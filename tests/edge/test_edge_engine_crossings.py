"""A strict admission crosses between the edge and the engine a handful of times: the engine
judges once, settles on a snapshot of the counts each try (policies.judge.budgets.BudgetCounts),
and never calls back into the counters; the rest are the cluster's state the engine reads as it
judges (policies.review.cluster.ClusterState) and the answer read once. The per-pod
compare-and-swap path settles twice (before its turn at the Lease and in it). Counted by a profiler
(tests/support/crossings.py), on the compiled engine's source as Python."""

from __future__ import annotations

import pytest

from policies.engine import COMPILED
from tests.support.builders import policy
from tests.support.cluster import NS, Replica, slice_pod
from tests.support.crossings import crossings

pytestmark = [pytest.mark.slow, pytest.mark.skipif(COMPILED, reason="a profiler sees no call inside compiled modules")]

# The cluster's state read as the engine judges a pod (namespace labels, capacity,
# DeviceClasses): not budgets, and not settled on the snapshot.
CLUSTER_READS = 3
DOZEN = 12  # what a strict admission may cross, by either path


def strict(limit: int) -> str:
    return policy("big", f"match: {{namespaces: [team-a]}}\nquota: {{limits: {{pods: {limit}}}, consistency: strict}}")


def admitted_with_crossings(kube, replicas, limit: int, shares: bool):
    kube.put(NS, "big", {"b.yaml": strict(limit)})
    replica = Replica(kube, strict_ttl=30, strict_shares=shares)
    replicas.append(replica)
    replica.wait_ready()
    for i in range(3):  # a Lease that holds entries already
        admitted = slice_pod(f"w{i}")
        assert replica.validate(admitted).allowed
        kube.put_pod(admitted)
    candidate, answers = slice_pod("x"), []
    found = crossings(lambda: answers.append(replica.validate(candidate)))
    assert answers[0].allowed
    return found


def callbacks(found) -> list[str]:
    return [callee for (caller, _, callee), _ in found.items() if caller == "policies"]


@pytest.mark.parametrize("shares", [False, True], ids=["per-pod compare-and-swap", "from a share"])
def test_a_strict_admission_crosses_a_handful_of_times_and_settling_calls_nothing_back(kube, replicas, shares):
    found = admitted_with_crossings(kube, replicas, 100_000, shares)
    assert not [c for c in callbacks(found) if "usage" in c or "claims" in c or "Budget" in c], found
    assert len(callbacks(found)) <= CLUSTER_READS, found
    assert sum(found.values()) <= DOZEN, found
