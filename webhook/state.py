"""The holder: the engine in force and the replica's view of its cluster. The engine is swapped
whole and read without locks (one attribute store is atomic). Serving reaches the cluster only
through here."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from policies import Decision, Engine, PolicySet
from webhook.cluster.live import LOCAL, ClusterLink, LiveCluster
from webhook.cluster.quota.budget_holdings import BudgetHoldings
from webhook.cluster.quota.counting.reservations import UPDATE, PodRef
from webhook.cluster.quota.quota_metrics import QuotaCollector
from webhook.cluster.quota.tracking import QuotaTracking
from webhook.events import Events


@dataclass(frozen=True)
class AdmissionSettings:
    fail_open: bool = False
    # The webhook's own namespace: policy ConfigMaps there are cluster-wide, elsewhere namespaced.
    policy_namespace: str = ""
    # Where labelled ConfigMaps outside it hold namespaced policies: "" (nowhere, the default),
    # "all" (every namespace) or "labelled" (namespaces labelled gpu-admission.io/policies=enabled).
    namespaced_policies: str = ""


class EngineHolder:
    def __init__(
        self,
        settings: AdmissionSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        link: ClusterLink = LOCAL,
    ) -> None:
        self.settings = settings or AdmissionSettings()
        self._engine: Engine | None = None
        self.events = Events()  # what happens in the replica, and who reacts (webhook.events)
        self.view = LiveCluster(self._policy_set, self.events, clock, link)
        self._loaded = threading.Event()
        self.load_errors = 0
        self.sources: list[Any] = []  # policy sources with a thread (webhook.sources.directories)
        self.gates: list[Callable[[], str]] = []  # more readiness conditions: why not ready, or ""
        # One engine run at a time in a replica, first come first served. The engine is Python
        # bound to the GIL, so two runs at once end no sooner than one after the other; but each
        # thread running it keeps every thread doing I/O (a strict quota's Lease write in its
        # turn at the Lease, a watch event) waiting for the GIL after each socket call, up to a
        # switch interval apiece. Queued here, they wait without holding it. Taken with no
        # other lock held (docs/quota-internals.md, the lock order); `admit` settles after it.
        self.engine_gate = threading.Semaphore(1)

    def _policy_set(self) -> PolicySet | None:
        return self._engine.policy_set if self._engine else None

    @property
    def engine(self) -> Engine | None:
        return self._engine

    @property
    def cluster(self) -> LiveCluster:
        return self.view

    @property
    def tracking(self) -> QuotaTracking:
        """Quota tracking as now in force (local, or through the strict budgets' Leases)."""
        return self.view.tracking

    @property
    def budgets(self) -> BudgetHoldings:
        """What each budget holds: the engine's UsageSource."""
        return self.view.tracking.budgets

    def quota_metrics(self) -> QuotaCollector:
        """The replica's quota view as metrics, computed when scraped."""
        return QuotaCollector(lambda: self.view.quota_lines(self._policy_set()), lambda: self.budgets.escrow)

    @property
    def ready(self) -> bool:
        return not self.readiness()[0]

    def readiness(self) -> tuple[str, str]:
        """(why not ready, what is worth knowing though ready): "" each when there is nothing.

        Not ready until a policy set is loaded and every cluster watch has listed once, and
        never again while a watcher's thread has stopped. A source that cannot be read right
        now (its last good version still serving) is said, but does not hold readiness back.
        """
        if not self._loaded.is_set():
            return "no policy set loaded yet", ""
        waiting = next((reason for gate in self.gates if (reason := gate())), "")
        if waiting:
            return waiting, ""
        for source in self.sources:
            if not source.alive:
                return f"{source.name} stopped: {source.error}", ""
        notes = [f"{s.name}: {s.error}" for s in self.sources if s.error]
        lapsed = self._engine.policy_set.lapsed if self._engine is not None else ()
        if lapsed:  # ready, since failing closed is the answer, but never silently
            notes.append("out of force (failing closed): " + ", ".join(f"{x.policy} ({x.file})" for x in lapsed))
        return "", "; ".join(notes)

    def swap(self, engine: Engine) -> None:
        self._engine = engine
        self._loaded.set()
        self.view.policy_set_changed()

    def admit(
        self,
        judged: Decision,
        namespace: str,
        name: str,
        obj: Mapping[str, Any],
        dry_run: bool,
        update: bool = False,
    ) -> Decision:
        """Settle the engine's `judged` decision's budgets and, if allowed for real, reserve the
        pod's usage, as one step (the object is kept with the reservation: a new policy set
        charges it again). An `update` that grows a pod's charge holds what it grows to
        (webhook.cluster.quota.counting.reservations.UPDATE)."""
        found = obj.get("metadata")
        metadata: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        uid = str(metadata.get("uid") or "")
        pod = PodRef(
            namespace,
            str(metadata.get("name") or name),
            str(metadata.get("generateName") or ""),
            f"{uid or namespace + '/' + name}{UPDATE}" if update else uid,
        )
        return self.view.tracking.admission.admit(judged, pod, dry_run, obj)
