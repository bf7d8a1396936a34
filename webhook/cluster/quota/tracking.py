"""Quota tracking in a replica, built complete in one place: the pods counted and reserved
(webhook.cluster.quota.counting.pod_counting), what each budget holds in the replica's view
(webhook.cluster.quota.budget_holdings), admission against it (webhook.cluster.quota.quota_admission)
and, where strict budgets lend shares, the thread that keeps them (ShareKeeper).

Each part gets what it works with when it is made and holds the parts below it; none is
finished by assigning its attributes afterwards. A replica's view builds its tracking once, over
its own counting: local without a cluster (no Leases, no shares), strict through the Leases with
one (webhook.cluster.wiring.cluster_link).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.cluster.quota.budget_holdings import BudgetHoldings
from webhook.cluster.quota.counting.pod_counting import PodCounting
from webhook.cluster.quota.leases.ledger_leases import LedgerLeases
from webhook.cluster.quota.leases.shared_quota import SharedReservations
from webhook.cluster.quota.quota_admission import CONFIRM_AFTER, QuotaAdmission
from webhook.cluster.quota.shares.escrow import Escrow
from webhook.cluster.quota.shares.share_writers import ShareKeeper
from webhook.events import Events, LeaseMoved, PolicySetInForce, ShareLow, SharesWanted


@dataclass(frozen=True, slots=True)
class QuotaTracking:
    """The parts, top to bottom: `admission` judges against `budgets`, which reads `counting`;
    `keeper` (not started here) keeps this replica's shares, where it lends any."""

    counting: PodCounting
    budgets: BudgetHoldings
    admission: QuotaAdmission
    keeper: ShareKeeper | None = None


# How a replica's view builds its tracking over its counters, given its events hub.
TrackingFactory = Callable[[PodCounting, Events], QuotaTracking]


def build_tracking(
    counting: PodCounting,
    events: Events | None = None,
    shared: SharedReservations | None = None,
    escrow: Escrow | None = None,
    confirm_after: float = CONFIRM_AFTER,
) -> QuotaTracking:
    """Tracking over `counting`: local (no `shared`), strict through the Leases (`shared`), and
    with shares of them (`escrow` too), kept by a ShareKeeper that hears of them on `events`
    (the hub `shared`'s Leases and `escrow` publish to)."""
    budgets = BudgetHoldings(counting, shared, escrow)
    admission = QuotaAdmission(budgets, confirm_after=confirm_after)
    if shared is None or escrow is None or events is None:
        return QuotaTracking(counting, budgets, admission)
    keeper = ShareKeeper(escrow, shared, top_up=budgets.top_up, warm=budgets.warm, crowded=budgets.crowded)
    # Shares of budgets a new policy set changed go back before the pods are charged by it (this
    # view's reactors come before those webhook.cluster.wiring names).
    events.subscribe(PolicySetInForce, lambda _: budgets.policy_set_changed())
    # The keeper hears of its shares where it happens: drawn low by an admission, asked back or
    # its Lease moved (both seen by the Lease watch).
    events.subscribe(ShareLow, keeper.low)
    events.subscribe(SharesWanted, keeper.wanted)
    events.subscribe(LeaseMoved, keeper.moved)
    return QuotaTracking(counting, budgets, admission, keeper)


def strict_tracking(
    coordination: Any, namespace: str, identity: str, ttl: float, shares: bool, confirm_after: float
) -> TrackingFactory:
    """Tracking whose strict budgets live in Leases of `namespace` (read and written through the
    CoordinationV1Api `coordination`), lending shares of them to replicas where `shares`."""

    def build(counting: PodCounting, events: Events) -> QuotaTracking:
        leases = LedgerLeases(coordination, namespace, identity, ttl=ttl, events=events)
        escrow = Escrow(identity, ttl=ttl, events=events) if shares else None
        return build_tracking(counting, events, SharedReservations(leases), escrow, confirm_after)

    return build
