"""Quota usage in the server: counters per (policy, scope) fed by pod events, plus reservations.

Between admitting a pod and seeing it in the pod watch, its usage is held as a reservation,
released when the pod shows up or after a timeout; dry-run never reserves. Check and reserve
happen under one lock, so concurrent admissions in one process never admit more than a quota
allows. Only counters are kept, never pod objects.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policies.ledger import Charges, Ledger, holdings
from policies.model import GPUPolicy
from policies.usage import Usage
from policies.validation import Decision
from webhook.quantity import parse_quantity


@dataclass(frozen=True)
class Reservation:
    namespace: str
    name: str
    generate_name: str
    charges: Charges
    usage: Usage
    expires: float

    def claimed_by(self, namespace: str, name: str) -> bool:
        if namespace != self.namespace:
            return False
        return name == self.name if self.name else bool(self.generate_name) and name.startswith(self.generate_name)


class PodUsageTracker:
    def __init__(
        self, policy_set: Callable[[], Any], clock: Callable[[], float] = time.monotonic, ttl: float = 30.0
    ) -> None:
        self._policy_set = policy_set
        self._clock = clock
        self.ttl = ttl
        self._lock = threading.RLock()
        self._ledger = Ledger()
        self._pods: dict[str, tuple[Charges, Usage]] = {}
        self._reservations: list[Reservation] = []

    # -- UsageSource -------------------------------------------------------------------------
    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        with self._lock:
            self._expire()
            held = self._ledger.usage(policy, scope)
            for reservation in self._reservations:
                if (policy.name, scope) in reservation.charges:
                    held = held + reservation.usage
            return held

    @property
    def reservations(self) -> int:
        with self._lock:
            self._expire()
            return len(self._reservations)

    def _expire(self) -> None:
        now = self._clock()
        self._reservations = [r for r in self._reservations if r.expires > now]

    # -- admission -----------------------------------------------------------------------------
    def admit(
        self, decide: Callable[[], Decision], namespace: str, name: str, generate_name: str, dry_run: bool
    ) -> Decision:
        """Decide and, if allowed for real, reserve, as one step."""
        with self._lock:
            decision = decide()
            if decision.allowed and decision.charges and not decision.usage.empty and not dry_run:
                self._reservations.append(
                    Reservation(
                        namespace, name, generate_name, decision.charges, decision.usage, self._clock() + self.ttl
                    )
                )
            return decision

    # -- pod events ----------------------------------------------------------------------------
    def observe(self, kind: str, raw: dict[str, Any]) -> None:
        metadata = raw.get("metadata") or {}
        namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        key = str(metadata.get("uid") or f"{namespace}/{name}")
        policy_set = self._policy_set()
        with self._lock:
            old = self._pods.pop(key, None)
            if old is not None:
                self._ledger.discharge(*old)
            if kind != "DELETED" and policy_set is not None:
                held = holdings(raw, policy_set, parse_quantity)
                if held is not None:
                    self._ledger.charge(*held)
                    self._pods[key] = held
            if kind == "ADDED":
                for i, reservation in enumerate(self._reservations):
                    if reservation.claimed_by(namespace, name):
                        del self._reservations[i]
                        break

    def replace_all(self, pods: list[dict[str, Any]]) -> None:
        """A full relist: counters rebuilt from the pods as they are now."""
        with self._lock:
            self._ledger = Ledger()
            self._pods.clear()
            for raw in pods:
                self.observe("MODIFIED", raw)
