"""What each budget holds in this replica's view, and the shares it grants itself from it.

A budget holds the pods counted (webhook.cluster.quota.counting.pod_counting), this replica's
reservations, and, for a strict one, the entries of its Lease this replica's watch does not
account for yet: other replicas' shares whole, its own not at all (its admissions from it are its
own reservations). Admission (webhook.cluster.quota.quota_admission) checks against this view.

Shares of strict budgets (webhook.cluster.quota.shares.escrow) are granted from what the view leaves
free: by an admission that finds its share spent (quota_admission), and ahead of need: as the replica
starts, for the budgets it counts pods under (`warm`, run by its keeper once its pod watch has
listed, and after a new policy set), and by its keeper once admissions draw a share under half
its last grant (`top_up`). So no admission waits on the Lease write that grants one, but each
replica's first under a budget it counts no pod under. Near the limit what a share holds goes
back unasked (`crowded`), and every pod there is judged by the per-pod path.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from policies import BudgetCounts, BudgetReads, Consistency, GPUPolicy, Quota, Usage
from webhook.cluster.quota.counting.beyond_watch import NO_LEASES, LeaseEntries
from webhook.cluster.quota.counting.pod_counting import PodCounting
from webhook.cluster.quota.leases.lease_entries import GRANT_PREFIX
from webhook.cluster.quota.leases.lease_wire import LedgerUnavailable
from webhook.cluster.quota.leases.shared_quota import SharedReservations
from webhook.cluster.quota.shares.escrow import Dims, Escrow, Key, crowded, dims_of, limits_of
from webhook.cluster.quota.shares.share_writers import refill

TOP_UP_WAIT = 1.0  # seconds a refill ahead of need waits for the replica's turn at a Lease
WARM_BUDGETS = 32  # strict budgets a replica takes shares of as it starts, most pods first


class BudgetHoldings:
    """What each budget holds: the pods `counting` counts and reserves, the strict budgets'
    Leases (`shared`, None: no cluster), and this replica's shares of them (`escrow`, None:
    shares off). A Lease is read before the counters are asked, never while they are held."""

    def __init__(
        self, counting: PodCounting, shared: SharedReservations | None = None, escrow: Escrow | None = None
    ) -> None:
        self.counting = counting
        self.shared = shared
        self.escrow = escrow  # strict budgets' shares held by this replica (webhook.cluster.quota.shares.escrow)
        self.warmed = threading.Event()  # `warm` has run: shares of the budgets in use granted, or tried

    def policy_set_changed(self) -> None:
        """Shares of budgets a new policy set changed are given back (PolicySetInForce)."""
        if self.escrow is not None:
            quotas = self.counting.reading.quotas
            self.escrow.forget(lambda key, quota: quotas((key,)).get(key) == quota)

    # -- UsageSource: what the engine reads judging a workload or a claim (a pod's budgets are
    # settled on a snapshot instead, QuotaAdmission); each read a snapshot of its own ---------------
    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        """What the budget holds in this replica's view."""
        return self._held(policy, scope, counted=True)

    def shared_claims(self, policy: GPUPolicy, scope: str) -> Collection[str]:
        """Named claims the counted pods hold (reservations charge each pod's whole: a pod that
        shares a claim counts it again until the watch shows it, never less than it can get)."""
        counts: BudgetCounts = self.counting.counts(BudgetReads(((policy, scope),), claims=True))[0]
        return counts.shared_claims(policy, scope)

    def reserved(self, policy: GPUPolicy, scope: str) -> Usage:
        """Admitted but not yet seen as pods: the quota view's `reserved`."""
        return self._held(policy, scope, counted=False)

    def _held(self, policy: GPUPolicy, scope: str, counted: bool) -> Usage:
        """What the budget holds beyond the watch, and (`counted`) what the watch shows too."""
        reads = BudgetReads(((policy, scope),))
        counts: BudgetCounts = self.counting.counts(reads, self.leases(reads), counted=counted)[0]
        return counts.usage(policy, scope)

    def leases(self, reads: BudgetReads) -> LeaseEntries:
        """What the Leases of the strict budgets among `reads` hold, as last read (read now if
        never: before the counters are asked, so no API request waits under their lock)."""
        shared = self.shared
        strict = [(policy.name, scope) for policy, scope in reads.budgets if is_strict(policy)]
        if shared is None or not strict:
            return NO_LEASES
        shared.leases.read_once(tuple(strict))
        own = self.escrow.key if self.escrow is not None else None
        shares: dict[Key, tuple[Usage, ...]] = {}
        pods: dict[Key, dict[str, Usage]] = {}
        for key in strict:
            alive = {entry.key: entry.usage for entry in shared.leases.live(key)}
            # A replica's share: the others' count whole, this replica's own not at all.
            shares[key] = tuple(usage for at, usage in alive.items() if at.startswith(GRANT_PREFIX) and at != own)
            pods[key] = {at: usage for at, usage in alive.items() if not at.startswith(GRANT_PREFIX)}
        return LeaseEntries(shares, pods, self.escrow.itemized if self.escrow is not None else ())

    # -- shares granted ahead of need ----------------------------------------------------------
    def warm(self, budgets: int = WARM_BUDGETS) -> int:
        """Grant this replica shares of the strict budgets its counters show pods under (the
        `budgets` with most pods) and it holds none of, each sized for pods like the mean one
        counted, before any admission asks: run by its keeper once its pod watch has listed, and
        after each new policy set, so its first admissions under them take from a share instead
        of waiting on a Lease write (with any that queue behind it). A share no admission uses
        goes back once idle, as any other. Returns how many were granted."""
        try:
            return self._warm(budgets)
        finally:
            self.warmed.set()

    def _warm(self, budgets: int) -> int:
        policy_set = self.counting.reading.policy_set()
        if self.shared is None or self.escrow is None or policy_set is None:
            return 0
        in_use = []
        for key, counted in self.counting.budgets_held():
            policy = policy_set.by_name(key[0])
            if policy is not None and is_strict(policy) and counted.pods:
                in_use.append((key, counted))
        in_use.sort(key=lambda item: -item[1].pods)
        granted = 0
        for key, counted in in_use[:budgets]:
            quota = self.counting.reading.quotas((key,)).get(key)
            if quota is None or any(self.escrow.remaining(key, quota).values()):
                continue  # held already (a new policy set left this budget as it was)
            try:
                if self.top_up(key, quota, counted.per_pod()):
                    granted += 1
            except LedgerUnavailable:
                break  # the API server away: the first admissions grant, as without
        return granted

    def top_up(self, key: Key, quota: Quota, need: Usage) -> bool:
        """Refill this replica's share of `key` ahead of need (ShareKeeper, out of admission), in
        its turn at the Lease; False if not granted (the budget changed, its turn did not come
        within a second, near the limit, or the Lease contended)."""
        if self.shared is None or self.escrow is None or self.counting.reading.quotas((key,)).get(key) != quota:
            return False
        with self.shared.turn((key,), TOP_UP_WAIT) as ours:
            return ours and refill(self.escrow, self.shared, (key,), {key: quota}, need, self.free, ahead=True)

    def crowded(self, key: Key) -> bool:
        """Whether the budget of this replica's share of `key` is near the limit (ShareKeeper):
        fewer than ROOM more pods like the one the share was sized for would fit even with what
        is left of it given back. What it holds then goes back, and every pod is judged by the
        per-pod compare-and-swap; a dry run, which cannot ask for shares back, is then judged on
        what a real request would find. (Given back, it would not be granted again: no flapping.)"""
        held = self.escrow.holding(key) if self.escrow is not None else None
        if self.shared is None or held is None or self.counting.reading.quotas((key,)).get(key) != held[0]:
            return False
        try:
            self.shared.leases.refresh((key,))  # as the watch shows it: a holder that writes nothing reads nothing
        except LedgerUnavailable:
            return False  # looked at again when the Lease next moves
        quota, need = held
        return crowded(quota, need, self.free(key, quota, own_share=False))

    def free(self, key: Key, quota: Quota, own_share: bool = True) -> Dims:
        """What the budget has free in this replica's view: its limit, less what the pods counted,
        the Lease's other entries, this replica's reservations and (`own_share`) what is left of
        its own share hold, the last two read in one step (an admission from the share moves
        what it takes from the share to a reservation in one step too: read apart, it would be
        in neither)."""
        policy_set = self.counting.reading.policy_set()
        policy = policy_set.by_name(key[0]) if policy_set is not None else None
        escrow = self.escrow if own_share else None
        reads = BudgetReads(((policy, key[1]),) if policy is not None else ())
        counts, own = self.counting.counts(
            reads, self.leases(reads), (lambda: escrow.remaining(key, quota)) if escrow is not None else None
        )
        used = dims_of(quota, counts.usage(policy, key[1])) if policy is not None else {}
        own = own or {}
        return {name: limit - used.get(name, 0) - own.get(name, 0) for name, limit in limits_of(quota).items()}


def is_strict(policy: GPUPolicy) -> bool:
    return policy.quota is not None and policy.quota.consistency is Consistency.STRICT
