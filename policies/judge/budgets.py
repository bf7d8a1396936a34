"""A pod's budgets, judged apart from the rest of its verdict.

Everything else the engine says of a pod follows from the pod, the policies and the cluster; a
budget also reads what other pods hold, which moves while a review is judged. So the engine
judges a pod with its budgets left to settle (`PodBudgets`: the quotas that charge it, and what
it holds), and `Decision.settle` judges them against a UsageSource's counts: the offline
commands at once, the webhook on a snapshot of them (`BudgetCounts`: the budgets the decision
reads, `PodBudgets.reads`, taken under its counters' lock as one step with the reservation), after
the rest of the engine ran outside it. So settling never calls back into the edge. A strict
budget's retries settle again on a new snapshot; the engine does not run again.

On UPDATE a budget judges only what the update adds, which the old object never did: nothing
here is ever excused as the ratchet excuses (policies.judge.validation.ratchet).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from policies.judge.claim_usage import ClaimsCharge, with_claims
from policies.judge.quota import UsageSource, check_quota
from policies.judge.usage import EMPTY, Usage
from policies.judge.verdict import Verdict
from policies.model.policy import GPUPolicy, Quota


@dataclass(frozen=True, slots=True)
class PodBudgets:
    """The quotas charging one pod, each with its scope, and what the pod holds. Made once per
    pod judged."""

    quotas: tuple[tuple[GPUPolicy, Quota, str], ...]  # (policy, its quota, the scope charged)
    namespace: str
    usage: Usage  # all the pod can get, its claims included
    base: Usage  # the same without its claims: a named claim the budget holds adds nothing again
    claims: ClaimsCharge
    added: Usage | None  # an UPDATE's growth, else None: the whole pod
    subject: str
    joined: frozenset[str] = frozenset()  # policies an UPDATE moved the pod under: the whole pod

    @property
    def reads(self) -> BudgetReads:
        """The budgets settling reads (policy, scope), and whether it reads their named claims."""
        return BudgetReads(tuple((policy, scope) for policy, _, scope in self.quotas), bool(self.claims.shared))

    def verdicts(self, source: UsageSource) -> list[Verdict]:
        """Per quota, the per-pod caps on the pod's charge and each limit on what it adds to
        the scope's counts in `source`, read now."""
        found: list[Verdict] = []
        usage, claims = self.usage, self.claims
        for policy, quota, scope in self.quotas:
            charge = usage
            if claims.shared:  # the named claims the scope's pods hold already are charged once
                charge = with_claims(self.base, claims, source.shared_claims(policy, scope))
            added = None if policy.name in self.joined else self.added
            found += check_quota(policy, quota, self.namespace, charge, source.usage(policy, scope), added)
        return [v.about(self.subject) for v in found] if found else found


BudgetKey = tuple[str, str]  # (policy name, scope)


@dataclass(frozen=True, slots=True)
class BudgetReads:
    """What settling a decision reads: the budgets charging its pod, each (policy, scope), and
    whether it reads the named claims they hold."""

    budgets: tuple[tuple[GPUPolicy, str], ...] = ()
    claims: bool = False


NO_READS = BudgetReads()


class Counted(Protocol):
    """What holds counts a snapshot is taken of (policies.judge.ledger.Ledger)."""

    def counts(self, reads: BudgetReads, beyond: Mapping[BudgetKey, Sequence[Usage]]) -> BudgetCounts: ...


class BudgetCounts:
    """A snapshot of what some budgets hold, taken once and read by `Decision.settle` (a
    UsageSource of plain values: settling on it reads nothing else). A budget left out holds
    nothing."""

    __slots__ = ("_claims", "_usage")

    def __init__(
        self, usage: Mapping[BudgetKey, Usage], claims: Mapping[BudgetKey, Collection[str]] | None = None
    ) -> None:
        self._usage = usage
        self._claims: Mapping[BudgetKey, Collection[str]] = {} if claims is None else claims

    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        return self._usage.get((policy.name, scope), EMPTY)

    def shared_claims(self, policy: GPUPolicy, scope: str) -> Collection[str]:
        return self._claims.get((policy.name, scope), ())
