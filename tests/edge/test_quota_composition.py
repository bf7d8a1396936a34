"""Quota tracking is made of parts that hold one another, built complete in one place
(webhook.cluster.quota.tracking): no part extends another, a replica's view builds its tracking
over its own counters (as its cluster link says), and the keeper of shares hears of them as soon
as it is built."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import webhook.cluster.quota as quota_package
from tests.support.builders import engine_from, pod, policy
from webhook.cluster.live import ClusterLink
from webhook.cluster.quota.counting.pod_counting import PodCounting
from webhook.cluster.quota.leases.ledger_leases import LedgerLeases
from webhook.cluster.quota.leases.shared_quota import SharedReservations
from webhook.cluster.quota.shares.escrow import Escrow
from webhook.cluster.quota.tracking import build_tracking
from webhook.events import Events, LeaseMoved, PolicySetInForce, ShareLow, SharesWanted
from webhook.state import EngineHolder

QUOTA = policy("team-a", "match: {namespaces: [team-a]}\nquota: {limits: {pods: 5}}\n")


def quota_classes() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(quota_package.__path__, f"{quota_package.__name__}."):
        module = importlib.import_module(info.name)
        found += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    return found


def test_no_quota_class_extends_another_of_the_project():
    """Composition, not inheritance: a subclass reading its base's private state spread one
    object over several files (PodUsageTracker(BudgetHoldings(PodCounting)) once)."""
    extended = {
        cls.__qualname__: [base.__qualname__ for base in cls.__mro__[1:] if base.__module__.startswith("webhook.")]
        for cls in quota_classes()
    }
    assert {name: bases for name, bases in extended.items() if bases} == {}


def test_the_view_builds_its_tracking_over_its_own_counters_as_its_link_says():
    holder = EngineHolder(link=ClusterLink(tracking=lambda counting, _: build_tracking(counting, confirm_after=1.0)))
    assert holder.tracking.admission.confirm_after == 1.0 and holder.tracking.counting is holder.view.counting
    holder.swap(engine_from(QUOTA))
    gpu = pod(
        {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}, namespace="team-a"
    )
    gpu["metadata"].update(name="p0", uid="uid-p0")
    judged = holder.engine.judge(gpu, holder.budgets)
    assert holder.admit(judged, "team-a", "p0", gpu, dry_run=False).allowed
    budget = holder.engine.policy_set.by_name("team-a")
    assert holder.budgets.usage(budget, "team-a").pods == 1  # the reservation, held by the view's counting


def test_tracking_over_another_replicas_counters_is_refused():
    elsewhere = PodCounting(lambda: None)
    with pytest.raises(ValueError, match="this view's counting"):
        EngineHolder(link=ClusterLink(tracking=lambda counting, _: build_tracking(elsewhere)))


def test_local_tracking_has_no_leases_no_shares_and_no_keeper():
    tracking = build_tracking(PodCounting(lambda: None))
    assert tracking.budgets.shared is None and tracking.budgets.escrow is None and tracking.keeper is None
    assert tracking.admission.budgets is tracking.budgets and tracking.budgets.counting is tracking.counting


def test_the_keeper_hears_of_its_shares_by_the_events_they_publish():
    """Drawn low by an admission, asked back, or its Lease moved: each an event (webhook.events)
    the parts publish to the hub they are built with, and the keeper is subscribed to as
    build_tracking makes it; nothing assigned after."""
    events = Events()
    leases = LedgerLeases(api=None, namespace="gpu-admission", identity="replica-1", events=events)
    escrow = Escrow("replica-1", events=events)
    tracking = build_tracking(PodCounting(lambda: None), events, SharedReservations(leases), escrow)
    keeper = tracking.keeper
    assert keeper is not None and keeper.escrow is escrow
    assert leases.events is escrow.events is events
    assert [events.reactors(kind) for kind in (ShareLow, SharesWanted, LeaseMoved, PolicySetInForce)] == [1, 1, 1, 1]
    assert tracking.budgets.shared is not None and tracking.budgets.shared.leases is leases
    assert tracking.admission.escrow is escrow
