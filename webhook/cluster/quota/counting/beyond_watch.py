"""What a budget holds beyond what the pod watch shows: this replica's reservations and, for a
strict budget, the entries of its Lease. Worked out under the counters' lock by
webhook.cluster.quota.counting.pod_counting (it reads their state; it takes no lock itself).

A CREATE's reservation or Lease entry adds all it holds until the watch shows the pod; an
UPDATE's adds what it holds beyond what the watch shows the pod holding in the budget or, not
seen yet, beyond its CREATE's there: a pod an UPDATE moved into the budget holds nothing there
yet. Other replicas' shares of a strict budget count whole, this replica's own not at all (what
it admitted from it is its own reservations), and a pod its share wrote out as the pod's own
entry counts once, as its reservation, until the watch shows it.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import NamedTuple

from policies import EMPTY, PodCounts, Usage
from webhook.cluster.quota.counting.reservations import Reservations, updated_pod

Key = tuple[str, str]  # (policy name, scope)


class LeaseEntries(NamedTuple):
    """What the strict budgets' Leases hold, as last read, read before the counters' lock: per
    budget, what other replicas' shares hold (`shares`: each whole) and the per-pod entries
    (`pods`: entry key -> usage); and the pods this replica's share wrote out as their own
    entries (`itemized`)."""

    shares: Mapping[Key, tuple[Usage, ...]]
    pods: Mapping[Key, Mapping[str, Usage]]
    itemized: Container[str] = ()


NO_LEASES = LeaseEntries({}, {})


class BeyondWatch:
    """The counters' state, read under their lock: `counts` (what the watch shows), `reservations`
    and `gone` (pods the watch has shown deleted or finished lately)."""

    __slots__ = ("_counts", "_gone", "_leases", "_reservations")

    def __init__(self, counts: PodCounts, reservations: Reservations, gone: Container[str], leases: LeaseEntries):
        self._counts = counts
        self._reservations = reservations
        self._gone = gone
        self._leases = leases

    def added(self, budget: Key) -> list[Usage]:
        """What `budget` holds beyond the watch, item by item (the engine sums them)."""
        reservations = self._reservations
        found = [reservations.total(budget), *self._leases.shares.get(budget, ())]
        for update in reservations.updates(budget):
            created = reservations.get(updated_pod(update.pod.key) or "")
            # Its CREATE's held here, or in the Lease (read below): beyond that only.
            held = (
                created.usage
                if created is not None and (budget in created.charges or budget in created.strict)
                else None
            )
            found.append(self._outstanding(update.pod.key, update.usage, held, budget))
        entries = self._leases.pods.get(budget) or {}
        for key, usage in entries.items():
            found.append(self._outstanding(key, usage, entries.get(updated_pod(key) or ""), budget))
        return found

    def _outstanding(self, key: str, usage: Usage, created: Usage | None, budget: Key) -> Usage:
        if key in self._leases.itemized and self._reservations.get(key) is not None:
            return EMPTY  # admitted here from a share, written out when asked: held here until the watch shows it
        pods = self._counts.pods
        pod = updated_pod(key)
        if pod is None:
            return EMPTY if key in pods or key in self._gone else usage
        if pod in self._gone:
            return EMPTY
        facts = pods.get(pod)
        if facts is None:  # not shown yet: beyond its CREATE's reservation, whole where that is not here
            return usage if created is None else usage.more_than(created)
        return usage.more_than(facts.total) if budget in self._counts.charges(pod) else usage
