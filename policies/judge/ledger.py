"""Usage held per (policy, scope), filled from pods already in the cluster.

The offline `validate --cluster-state` fills a Ledger from a v1 List of pods; admitted pods are
charged as they go, so a file of several pods is judged as the API server would admit them, one
by one. The server's counters (PodCounts) are fed pod by pod by its pod watch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from policies.errors import InputError
from policies.judge.budgets import BudgetCounts, BudgetKey, BudgetReads
from policies.judge.claim_usage import SharedClaims
from policies.judge.pod_facts import Charges, PodFacts, charged
from policies.judge.usage import EMPTY, Usage
from policies.model.policy import GPUPolicy
from policies.model.policyset import PolicySet
from policies.review.cluster import NO_CLUSTER, ClusterState
from policies.review.document import JSON


@dataclass(slots=True)
class _NamedClaim:
    pods: int  # the budget's pods naming it
    usage: Usage  # charged once, at the most any of them was charged for it


class Ledger:
    """Usage per budget: each pod's own, and each ResourceClaim its pods name once, at the most
    any of them was charged for it, for as long as one of them is counted."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], Usage] = {}
        self._claims: dict[tuple[str, str], dict[str, _NamedClaim]] = {}

    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        return self._held.get((policy.name, scope), EMPTY)

    def shared_claims(self, policy: GPUPolicy, scope: str) -> Collection[str]:
        """The named claims the budget charges already: another pod naming one adds nothing."""
        return self._claims.get((policy.name, scope), {}).keys()

    def counts(self, reads: BudgetReads, beyond: Mapping[BudgetKey, Sequence[Usage]]) -> BudgetCounts:
        """A snapshot of the budgets `reads` names: what this ledger holds in each, plus what
        `beyond` adds to it (a replica's reservations and its Leases' entries, each what it adds
        beyond what the ledger shows), and their named claims where read."""
        usage: dict[BudgetKey, Usage] = {}
        claims: dict[BudgetKey, Collection[str]] = {}
        for policy, scope in reads.budgets:
            key = (policy.name, scope)
            total = self._held.get(key, EMPTY)
            for added in beyond.get(key, ()):
                total = total + added
            usage[key] = total
            if reads.claims:
                claims[key] = frozenset(self._claims.get(key, {}))
        return BudgetCounts(usage, claims)

    def held(self) -> list[tuple[str, str]]:
        """The (policy, scope) pairs holding something."""
        return list(self._held)

    def charge(
        self, charges: Iterable[tuple[str, str]], usage: Usage, shared: SharedClaims = (), pods: int = 1
    ) -> None:
        """Charge `pods` pods holding `usage` in all (their own) and each naming the `shared` claims."""
        for key in charges:
            added = usage
            if shared:
                named = self._claims.setdefault(key, {})
                for claim, claim_usage in shared:
                    entry = named.get(claim)
                    if entry is None:
                        named[claim] = _NamedClaim(pods, claim_usage)
                        added = added + claim_usage
                        continue
                    entry.pods += pods
                    grown = claim_usage.more_than(entry.usage)  # charged at the most any pod saw it
                    if not grown.is_zero:
                        entry.usage = entry.usage + grown
                        added = added + grown
            self._held[key] = self._held.get(key, EMPTY) + added

    def discharge(
        self, charges: Iterable[tuple[str, str]], usage: Usage, shared: SharedClaims = (), pods: int = 1
    ) -> None:
        for key in charges:
            taken = usage
            named = self._claims.get(key)
            if named is not None:
                for claim, _ in shared:
                    entry = named.get(claim)
                    if entry is None:
                        continue
                    entry.pods -= pods
                    if entry.pods <= 0:  # the last pod naming it: the claim leaves the budget
                        del named[claim]
                        taken = taken + entry.usage
                if not named:
                    del self._claims[key]
            left = self._held.get(key, EMPTY) - taken
            if left.holds_anything:
                self._held[key] = left
            else:
                self._held.pop(key, None)

    @classmethod
    def from_pods(
        cls,
        pods: Iterable[JSON],
        policy_set: PolicySet,
        cluster: ClusterState = NO_CLUSTER,
    ) -> Ledger:
        ledger = cls()
        for i, raw in enumerate(pods):
            try:
                found = charged(raw, policy_set, cluster)
            except InputError as error:
                raise error.in_document(f"cluster state item {i + 1}") from None
            if found is not None:
                facts, charges = found
                ledger.charge(charges, facts.usage, facts.shared)
        return ledger


class PodCounts:
    """Counters fed by pods one at a time: usage per budget, and each pod's facts.

    Facts are interned (pods of one template share one record), and the pods per record are
    counted, so a new policy set or namespace labels charge the pods again record by record,
    not pod by pod.
    """

    def __init__(self, charge: Callable[[PodFacts], Charges]) -> None:
        self.ledger = Ledger()
        self.pods: dict[str, PodFacts] = {}
        self._charge = charge
        self._interned: dict[tuple[object, ...], PodFacts] = {}
        self._population: dict[PodFacts, int] = {}
        self._charges: dict[PodFacts, Charges] = {}

    def add(self, key: str, facts: PodFacts) -> PodFacts:
        """Count a pod (forget what was counted for it before first); returns the interned record."""
        self.remove(key)
        facts = self._interned.setdefault(facts.shape, facts)
        self.pods[key] = facts
        count = self._population.get(facts, 0)
        if not count:
            self._charges[facts] = self._charge(facts)
        self._population[facts] = count + 1
        self.ledger.charge(self._charges[facts], facts.usage, facts.shared)
        return facts

    def remove(self, key: str) -> PodFacts | None:
        facts = self.pods.pop(key, None)
        if facts is None:
            return None
        self.ledger.discharge(self._charges[facts], facts.usage, facts.shared)
        count = self._population[facts] - 1
        if count:
            self._population[facts] = count
        else:  # the last pod of its shape: nothing of it stays
            del self._population[facts], self._charges[facts], self._interned[facts.shape]
        return facts

    def charges(self, key: str) -> Charges:
        facts = self.pods.get(key)
        return () if facts is None else self._charges[facts]

    @property
    def shapes(self) -> int:
        return len(self._population)

    def recharge(self, charge: Callable[[PodFacts], Charges], namespaces: Collection[str] | None = None) -> int:
        """Charge the pods again with `charge` (kept for pods counted from now on): all of them (a
        new policy set) or those of `namespaces` (their labels changed). Returns how many pods'
        budgets changed."""
        self._charge = charge
        changed = 0
        for facts, count in self._population.items():
            if namespaces is not None and facts.namespace not in namespaces:
                continue
            old, new = self._charges[facts], charge(facts)
            if new == old:
                continue
            total = facts.usage.times(count)
            self.ledger.discharge(old, total, facts.shared, count)
            self.ledger.charge(new, total, facts.shared, count)
            self._charges[facts] = new
            changed += count
        return changed
