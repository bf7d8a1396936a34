"""A pod's budgets, judged apart from the rest of its verdict.

Everything else the engine says of a pod follows from the pod, the policies and the cluster; a
budget also reads what other pods hold, which moves while a review is judged. So the engine
judges a pod with its budgets left as checks (`BudgetCheck`, one per quota that charges it), and
`Decision.settle` judges those against a UsageSource's counts: the offline commands at once, the
webhook under its counters' lock, as one step with the reservation, after the rest of the engine
ran outside every lock. A strict budget's retries settle again; the engine does not run again.
"""

from __future__ import annotations

from policies.judge.claim_usage import ClaimsCharge, with_claims
from policies.judge.quota import UsageSource, check_quota
from policies.judge.usage import Usage
from policies.judge.verdict import Verdict
from policies.model.policy import GPUPolicy, Quota


class BudgetCheck:
    """One quota charging a pod: what the pod holds, to be judged on what its scope holds.

    One per matching quota of every pod judged: a plain class (the value-class rule,
    docs/architecture.md)."""

    __slots__ = ("policy", "quota", "namespace", "scope", "usage", "base", "claims", "added", "subject")

    def __init__(
        self,
        policy: GPUPolicy,
        quota: Quota,
        namespace: str,
        scope: str,
        usage: Usage,
        base: Usage,
        claims: ClaimsCharge,
        added: Usage | None,
        subject: str,
    ) -> None:
        self.policy = policy
        self.quota = quota
        self.namespace = namespace
        self.scope = scope
        self.usage = usage  # all the pod can get, its claims included
        self.base = base  # the same without its claims: a named claim the budget holds adds nothing again
        self.claims = claims
        self.added = added  # an UPDATE's growth, else None: the whole pod
        self.subject = subject

    def __repr__(self) -> str:
        return f"BudgetCheck({self.policy.name!r}, scope={self.scope!r}, usage={self.usage!r})"

    def verdicts(self, source: UsageSource) -> list[Verdict]:
        """The per-pod caps on the pod's charge and each limit on what it adds to the scope's
        counts in `source`, read now."""
        charge = self.usage
        if self.claims.shared:  # the named claims the scope's pods hold already are charged once
            charge = with_claims(self.base, self.claims, source.shared_claims(self.policy, self.scope))
        current = source.usage(self.policy, self.scope)
        found = check_quota(self.policy, self.quota, self.namespace, charge, current, self.added)
        return [v.about(self.subject) for v in found]


def budget_verdicts(checks: tuple[BudgetCheck, ...], source: UsageSource) -> list[Verdict]:
    """Every check's verdicts on `source`'s counts. None is ever excused as an UPDATE's ratchet
    excuses (what the object earned before): on UPDATE a budget judges only what the update
    adds, which the old object never did."""
    return [v for check in checks for v in check.verdicts(source)]
