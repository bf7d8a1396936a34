"""Admission against quota usage in the server: check and reserve, as one step.

Between admitting a pod and seeing it in the pod watch, its usage is held as a reservation,
released when the pod shows up or after a timeout; dry-run never reserves. The engine judges
the pod outside every lock, all but its budgets; the budgets are checked (Decision.settle) and
the pod reserved as one step under the counters' lock (they settle it on a snapshot of its budgets,
webhook.cluster.quota.counting.pod_counting.settle), so concurrent admissions in one process never
admit more than a quota allows, and none waits on another's CEL. Quotas with `consistency: strict` also hold their
reservations in a Lease shared by every replica (webhook.cluster.quota.leases.shared_quota), written by
compare-and-swap, unless the admission takes from this replica's share of the budget
(webhook.cluster.quota.shares.escrow).

What a budget holds in this replica's view, and the shares it grants itself, are
webhook.cluster.quota.budget_holdings's; the pods themselves and the reservations are counted by
webhook.cluster.quota.counting.pod_counting (only counters, never pod objects). The three are built
together, complete, by webhook.cluster.quota.tracking.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from policies import Action, BudgetReads, Charges, Decision, PolicySet, Quota, Verdict
from webhook.cluster.quota.budget_holdings import BudgetHoldings, is_strict
from webhook.cluster.quota.counting.reservations import NOT_READ, AsUpdated, PodRef, Reservation, updated_pod
from webhook.cluster.quota.leases.lease_wire import LedgerUnavailable
from webhook.cluster.quota.shares.share_writers import refill
from webhook.metrics import STRICT_OUT_OF_TIME

# What a strict admission may spend on its Leases (turns, writes, re-reads after conflicts):
# well inside the webhook's 3 s timeoutSeconds, so it ends in a clear denial, never a timeout.
STRICT_BUDGET = 1.5
# Seconds a replica waits for others to give their shares back before it denies: it ends as soon
# as they have (an event of its Lease watch); 0.25 s ran out under load on two cores.
HANDBACK_WAIT = 1.0
CONFIRM_AFTER = 5.0  # seconds without the watch showing an admitted pod before asking for it
log = logging.getLogger("gpu_admission.usage")


class QuotaAdmission:
    """Admission against what each budget holds (`budgets`): check and reserve under the
    counters' lock; strict budgets through their Leases, from this replica's shares."""

    def __init__(
        self, budgets: BudgetHoldings, confirm_after: float = CONFIRM_AFTER, strict_budget: float = STRICT_BUDGET
    ) -> None:
        self.budgets = budgets
        self.counting = budgets.counting
        self.shared = budgets.shared
        self.escrow = budgets.escrow
        self.confirm_after = confirm_after  # seconds the watch has to show an admitted pod
        self.strict_budget = strict_budget  # seconds a strict admission may spend on its Leases
        self._strict: tuple[PolicySet | None, Mapping[str, Quota]] = (None, {})  # _strict_quotas's

    def admit(self, judged: Decision, pod: PodRef, dry_run: bool, raw: Mapping[str, Any] | None = None) -> Decision:
        """Settle the engine's `judged` decision (its budgets, on these counters) and, if allowed
        for real, reserve, as one step (settled again while a strict Lease moves, within the
        strict time budget; the engine itself ran once, before, outside every lock).

        A strict quota whose Lease cannot be read or written denies: it cannot be judged.
        """
        kept = _in(raw, pod.namespace)  # once, outside the lock: each try reserves it as it is
        updated = NOT_READ
        if updated_pod(pod.key) is not None and judged.allowed and not dry_run:
            # An UPDATE is held as the pod stands after it (the budgets it is in, what the watch
            # will show): read from the pod again, outside the counters' lock.
            updated = AsUpdated(*self.counting.reading.as_updated(kept))
        # What every try settles and holds, read from the engine's decision once.
        admitting = Admitting(judged, pod, dry_run, kept, updated, judged.budget_reads, judged.usage.empty)
        try:
            return self._admit(admitting)
        except LedgerUnavailable as error:
            self._release(pod)
            return _denied(Decision(False), f"strict quota ledger unreachable, denied to be safe: {error}")

    def _admit(self, admitting: Admitting) -> Decision:
        pod, dry_run = admitting.pod, admitting.dry_run
        deadline = self.counting.clock() + self.strict_budget
        attempts = 0
        asked = False
        while True:
            decision, strict = self._reserve(admitting)
            if not strict:
                if asked or not self._look_again(decision, deadline, dry_run):
                    return decision
                asked = True  # judged again, once, on the Lease as read again or as the holders left it
                continue
            assert self.shared is not None
            self._release(pod)  # judged again in this replica's turn at the Leases
            with self.shared.turn(strict, deadline - self.counting.clock()) as ours:
                if not ours:
                    return self._out_of_time(decision, attempts)
                decision, in_turn = self._reserve(admitting)
                if in_turn and self.escrow is not None:  # no share granted meanwhile: ask for one
                    self._release(pod)
                    quotas = self.counting.reading.quotas(in_turn)
                    refill(self.escrow, self.shared, in_turn, quotas, decision.usage, self.budgets.free)
                    # Judged again either way: from the share, or on the Lease as the refill left it.
                    decision, in_turn = self._reserve(admitting)
                while in_turn:
                    if not set(in_turn) <= set(strict):  # a new policy set meanwhile: other Leases
                        self._release(pod)
                        break
                    attempts += 1
                    if self.shared.reserve(in_turn, pod, decision.usage):
                        return decision
                    self._release(pod)  # another replica wrote first: read again, judge again
                    if self.counting.clock() >= deadline:
                        return self._out_of_time(decision, attempts)
                    decision, in_turn = self._reserve(admitting)
                # Admitted without a write (from a share, or no strict budget left) stands. Denied
                # in turn, the pod is judged again out of it, where a denial first reads the Leases
                # again and asks for what other replicas' shares hold.
                if not in_turn and (decision.allowed or asked):
                    return decision
            if self.counting.clock() >= deadline:
                return self._out_of_time(decision, attempts)

    def _reserve(self, admitting: Admitting) -> tuple[Decision, Charges]:
        """Settle `judged` on the counters and, if allowed for real, hold the pod's usage; returns
        the strict quotas among its charges (their reservation is not made until written to their
        Leases). A pod no budget charges is held too, charged nothing: a new policy set may charge
        it (`raw`, kept with its reservation: in the namespace the API server names). An UPDATE is
        held as `updated` reads the pod after it: one that grows no budget in every budget it is in."""
        counting, escrow = self.counting, self.escrow
        judged, pod, raw, updated = admitting.judged, admitting.pod, admitting.raw, admitting.updated
        holds = not admitting.dry_run and judged.allowed and not admitting.holds_nothing  # as settled
        strict_quotas = self._strict_quotas()

        def hold(decision: Decision, earlier: Reservation | None) -> tuple[Reservation | None, Charges]:
            if not holds or not decision.allowed:
                return None, ()
            now = counting.clock()
            if updated_pod(pod.key) is not None and not decision.charges:
                # An UPDATE that grows no budget adds nothing to one, yet the pod is held as it
                # stands now, in every budget it is in: a new policy set charges it as updated,
                # not as first admitted nor as the watch last showed it (a relabelled pod, a gated
                # one widened where no budget charged it), until the watch shows it so.
                # Dormant (no budget reads it till a new set charges it) unless another UPDATE
                # of the pod holds a growth the watch has not shown yet: this one holds it on.
                dormant = earlier is None or earlier.dormant
                usage, expires = decision.usage, now + counting.ttl
                return Reservation(pod, updated.charges, usage, expires, now, (), raw, updated.facts, dormant), ()
            strict = tuple(c for c in decision.charges if c[0] in strict_quotas)
            if (
                strict
                and escrow is not None
                and escrow.take(strict, {c: strict_quotas[c[0]] for c in strict}, decision.usage, pod.key)
            ):
                strict = ()  # taken from this replica's shares: held here, like a local budget's
            local = tuple(c for c in decision.charges if c not in strict)
            return Reservation(pod, local, decision.usage, now + counting.ttl, now, strict, raw, updated.facts), strict

        # The strict budgets' Leases are read before the counters' lock is taken.
        return counting.settle(judged, admitting.reads, self.budgets.leases(admitting.reads), pod.key, hold)

    def _look_again(self, decision: Decision, deadline: float, dry_run: bool) -> bool:
        """A strict budget denies the pod: before the denial stands, read again the Leases whose
        watch shows them moved since this replica judged on them (a holder that wrote its entry
        smaller meanwhile: a denial writes nothing, so no compare-and-swap would catch it), and
        ask other replicas holding shares of them to give them back (a dry run, which writes
        nothing, only reads). Whether anything changed, so the pod is judged again."""
        if self.shared is None or decision.allowed:
            return False
        denied = {v.policy for v in decision.denials if v.rule.startswith("quota.") and ".perPod." not in v.rule}
        keys = tuple(key for key in self._strict_charges(decision.charges) if key[0] in denied)
        if not keys:
            return False
        before = [self.shared.leases.version(key) for key in keys]
        self.shared.leases.refresh(keys)
        asked = not dry_run and self._ask_back(keys, deadline)  # a dry run writes nothing, not even a request
        # Read again, by the refresh or by a request that met a conflict: judged on what was read.
        return asked or before != [self.shared.leases.version(key) for key in keys]

    def _ask_back(self, keys: Charges, deadline: float) -> bool:
        """Ask the replicas holding shares of `keys` to give them back
        (webhook.cluster.quota.leases.shared_quota.ask_back) and wait for their answer, a second at most.
        Whether any was asked."""
        wait = min(HANDBACK_WAIT, deadline - self.counting.clock())
        if self.shared is None or self.escrow is None or wait <= 0:
            return False
        answered_by = self.counting.clock() + wait
        own = self.escrow.key
        with self.shared.turn(keys, wait) as ours:
            requests = [a for key in (keys if ours else ()) if (a := self.shared.ask_back(key, own)) is not None]
        if not requests:
            return False
        # Waited for out of turn: a holder may be asking too, in its turn, while its answer waits on ours.
        for request in requests:
            self.shared.await_answer(request, max(0.0, answered_by - self.counting.clock()))
        with self.shared.turn(keys, max(wait, 1.0)) as ours:
            for request in requests if ours else ():
                self.shared.close_ask(request)
        return True

    def _release(self, pod: PodRef) -> None:
        self.counting.release(pod.key)

    def _out_of_time(self, decision: Decision, attempts: int) -> Decision:
        STRICT_OUT_OF_TIME.inc()
        message = (
            f"strict quota ledger contended for {self.strict_budget:g} s ({attempts} write attempts), "
            "denied rather than time out; try again"
        )
        return _denied(decision, message)

    # -- forged reviews ------------------------------------------------------------------------------
    def sweep_forged(self, exists: Callable[[PodRef], bool | None], limit: int = 20) -> int:
        """Release reservations whose pod the API server does not have (`exists` False) once
        `confirm_after` has passed without the watch showing it: a review forged for a pod that
        is never created holds its budget for seconds, not the whole TTL. At most `limit` looks
        a call; an unanswered look is tried again later. Returns how many were released."""
        counting = self.counting
        released = 0
        for reservation in counting.unconfirmed(counting.clock() - self.confirm_after, limit):
            if not counting.confirmed(reservation, exists(reservation.pod)):
                continue
            if reservation.strict and self.shared is not None:
                self.shared.withdraw(reservation.strict, reservation.pod)
            released += 1
            log.warning(
                "reservation released: its pod was never created",
                extra={"fields": {"pod": reservation.pod.key, "namespace": reservation.pod.namespace}},
            )
        return released

    def _strict_charges(self, charges: Charges) -> Charges:
        quotas = self._strict_quotas()
        return tuple(c for c in charges if c[0] in quotas)

    def _strict_quotas(self) -> Mapping[str, Quota]:
        """The policies in force whose budgets are strict (none without Leases), each with its
        quota: found once a policy set."""
        policy_set = self.counting.reading.policy_set()
        if self.shared is None or policy_set is None:
            return {}
        known = self._strict
        if known[0] is not policy_set:
            found = {p.name: p.quota for p in policy_set.policies if p.quota is not None and is_strict(p)}
            known = self._strict = (policy_set, found)
        return known[1]


@dataclass(frozen=True, slots=True)
class Admitting:
    """One admission, as every try of it settles and holds it: the engine's decision (`judged`),
    the pod, the object kept with its reservation (`raw`), an UPDATE's pod as it stands after it
    (`updated`), the budgets settling reads and whether the pod holds nothing (settling changes
    neither)."""

    judged: Decision
    pod: PodRef
    dry_run: bool
    raw: Mapping[str, Any] | None
    updated: AsUpdated
    reads: BudgetReads
    holds_nothing: bool


def _in(raw: Mapping[str, Any] | None, namespace: str) -> Mapping[str, Any] | None:
    """The pod as kept with its reservation: in the namespace the API server names."""
    if raw is None:
        return None
    metadata = raw.get("metadata")
    return {**raw, "metadata": {**(metadata if isinstance(metadata, Mapping) else {}), "namespace": namespace}}


def _denied(decision: Decision, message: str) -> Decision:
    policy = decision.policies[0] if decision.policies else ""
    verdict = Verdict(policy, "quota.consistency", "spec.quota.consistency", message, Action.DENY)
    return decision._replace(allowed=False, verdicts=(*decision.verdicts, verdict))
