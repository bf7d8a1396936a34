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

from policies import EMPTY, Consistency, GPUPolicy, Quota, Usage
from webhook.cluster.quota.counting.pod_counting import PodCounting
from webhook.cluster.quota.counting.reservations import updated_pod
from webhook.cluster.quota.leases.lease_entries import GRANT_PREFIX
from webhook.cluster.quota.leases.ledger_leases import LedgerUnavailable
from webhook.cluster.quota.leases.shared_quota import SharedReservations
from webhook.cluster.quota.shares.escrow import Dims, Escrow, Key, crowded, dims_of, limits_of
from webhook.cluster.quota.shares.share_writers import refill

TOP_UP_WAIT = 1.0  # seconds a refill ahead of need waits for the replica's turn at a Lease
WARM_BUDGETS = 32  # strict budgets a replica takes shares of as it starts, most pods first


class BudgetHoldings:
    """What each budget holds: the pods `counting` counts and reserves, the strict budgets'
    Leases (`shared`, None: no cluster), and this replica's shares of them (`escrow`, None:
    shares off). Read under the counting's lock; a Lease is never read from the API server
    while it is held."""

    def __init__(
        self, counting: PodCounting, shared: SharedReservations | None = None, escrow: Escrow | None = None
    ) -> None:
        self.counting = counting
        self.shared = shared
        self.escrow = escrow  # strict budgets' shares held by this replica (webhook.cluster.quota.shares.escrow)
        self.warmed = threading.Event()  # `warm` has run: shares of the budgets in use granted, or tried
        if escrow is not None:
            counting.on_recharged(self._policy_set_changed)

    def _policy_set_changed(self) -> None:
        """Shares of budgets a new policy set changed are given back (under the counting's lock)."""
        assert self.escrow is not None
        self.escrow.forget(lambda key, quota: self.counting.quotas((key,)).get(key) == quota)

    # -- UsageSource -------------------------------------------------------------------------
    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        self._read_lease(policy, scope)
        with self.counting.lock:
            return self.usage_under_lock(policy, scope)

    def usage_under_lock(self, policy: GPUPolicy, scope: str) -> Usage:
        """`usage`, its Lease read already and the counters' lock held (the budget's reservations
        expired first, under it)."""
        return self.counting.counted().usage(policy, scope) + self.reserved_under_lock(policy, scope)

    def shared_claims(self, policy: GPUPolicy, scope: str) -> Collection[str]:
        """Named claims the counted pods hold (reservations charge each pod's whole: a pod that
        shares a claim counts it again until the watch shows it, never less than it can get)."""
        with self.counting.lock:
            return self.shared_claims_under_lock(policy, scope)

    def shared_claims_under_lock(self, policy: GPUPolicy, scope: str) -> Collection[str]:
        return frozenset(self.counting.counted().shared_claims(policy, scope))

    @property
    def under_lock(self) -> LockedBudgets:
        """These budgets for a caller that holds the counters' lock and has read the strict
        budgets' Leases it settles on: admission settles on it, the lock taken once."""
        return LockedBudgets(self)

    def reserved(self, policy: GPUPolicy, scope: str) -> Usage:
        """Admitted but not yet seen as pods: the quota view's `reserved`."""
        self._read_lease(policy, scope)
        with self.counting.lock:
            return self.reserved_under_lock(policy, scope)

    def reserved_under_lock(self, policy: GPUPolicy, scope: str) -> Usage:
        key = (policy.name, scope)
        reservations = self.counting.reservations
        self.counting.expire()
        total = reservations.total(key)  # a strict budget's too: pods admitted from a share
        for update in reservations.updates(key):
            created = reservations.get(updated_pod(update.pod.key) or "")
            # Its CREATE's held here, or in the Lease (which `pending` counts): beyond that only.
            held = created.usage if created is not None and (key in created.charges or key in created.strict) else None
            total = total + self._outstanding(update.pod.key, update.usage, held, key)
        if self.shared is not None and is_strict(policy):
            total = total + self.shared.pending(key, lambda at, usage, held: self._outstanding(at, usage, held, key))
        return total

    def _read_lease(self, policy: GPUPolicy, scope: str) -> None:
        """A strict budget's Lease read before the counters' lock is taken, if never read yet
        (a caller holding it already has read it: QuotaAdmission.admit reads first)."""
        if self.shared is not None and is_strict(policy):
            self.shared.leases.read_once(((policy.name, scope),))

    def _outstanding(
        self, key: str, usage: Usage, created: Usage | None = None, budget: tuple[str, str] | None = None
    ) -> Usage:
        """What a reservation (or Lease entry) under `key` adds to its budget now: a CREATE's all
        of `usage` until the watch shows the pod; an UPDATE's what `usage` holds beyond what the
        watch shows the pod holding in `budget` or, not seen yet, beyond its CREATE's reservation
        there (`created`): a pod an UPDATE moved into the budget holds nothing there yet."""
        if key.startswith(GRANT_PREFIX):  # a replica's share: the others' count whole, ours not at all
            return EMPTY if self.escrow is not None and key == self.escrow.key else usage
        counting = self.counting
        if self.escrow is not None and key in self.escrow.itemized and counting.reservations.get(key) is not None:
            return EMPTY  # admitted here from a share, written out when asked: held here until the watch shows it
        pod = updated_pod(key)
        if pod is None:
            return EMPTY if counting.seen(key) else usage
        if counting.gone(pod):
            return EMPTY
        facts = counting.facts(pod)
        if facts is None:  # not shown yet: beyond its CREATE's reservation, whole where that is not here
            return usage if created is None else usage.more_than(created)
        shown_here = budget is None or budget in counting.charges_of(pod)
        return usage.more_than(facts.total) if shown_here else usage

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
        policy_set = self.counting.policy_set()
        if self.shared is None or self.escrow is None or policy_set is None:
            return 0
        in_use = []
        with self.counting.lock:
            ledger = self.counting.counted()
            for name, scope in ledger.held():
                policy = policy_set.by_name(name)
                if policy is not None and is_strict(policy) and (counted := ledger.usage(policy, scope)).pods:
                    in_use.append(((name, scope), counted))
        in_use.sort(key=lambda item: -item[1].pods)
        granted = 0
        for key, counted in in_use[:budgets]:
            quota = self.counting.quotas((key,)).get(key)
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
        if self.shared is None or self.escrow is None or self.counting.quotas((key,)).get(key) != quota:
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
        if self.shared is None or held is None or self.counting.quotas((key,)).get(key) != held[0]:
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
        its own share hold, all read under the counters' lock (an admission from the share moves
        what it takes from the share to a reservation under that lock too: read apart, it would
        be in neither)."""
        policy_set = self.counting.policy_set()
        policy = policy_set.by_name(key[0]) if policy_set is not None else None
        if policy is not None:
            self._read_lease(policy, key[1])
        with self.counting.lock:
            used = dims_of(quota, self.usage_under_lock(policy, key[1]) if policy is not None else EMPTY)
            own = self.escrow.remaining(key, quota) if self.escrow is not None and own_share else {}
        return {name: limit - used.get(name, 0) - own.get(name, 0) for name, limit in limits_of(quota).items()}


class LockedBudgets:
    """BudgetHoldings as a UsageSource (policies.judge) read under the counters' lock its caller
    holds: a budget settled there reads the counts once, never taking the lock again."""

    __slots__ = ("_holdings",)

    def __init__(self, holdings: BudgetHoldings) -> None:
        self._holdings = holdings

    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        return self._holdings.usage_under_lock(policy, scope)

    def shared_claims(self, policy: GPUPolicy, scope: str) -> Collection[str]:
        return self._holdings.shared_claims_under_lock(policy, scope)


def is_strict(policy: GPUPolicy) -> bool:
    return policy.quota is not None and policy.quota.consistency is Consistency.STRICT
