"""Quota usage in the server: counters per (policy, scope) fed by pod events, plus reservations.

Between admitting a pod and seeing it in the pod watch, its usage is held as a reservation,
released when the pod shows up or after a timeout; dry-run never reserves. Check and reserve
happen under one lock, so concurrent admissions in one process never admit more than a quota
allows. Quotas with `consistency: strict` also hold their reservations in a Lease shared by
every replica (webhook.cluster.shared_quota), written by compare-and-swap.

Only counters are kept, never pod objects: per pod, a reference to an interned record of what it
holds, so 100,000 pods of a few dozen shapes cost little more than their keys.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from policies.cluster import NO_CLUSTER, ClusterState
from policies.errors import InputError
from policies.gpu.capacity import CapacityLedger, node_gpus, node_uses
from policies.gpu.catalog import CATALOG
from policies.judge.ledger import Charges, Held, PodCounts, held_by
from policies.judge.usage import Usage
from policies.judge.validation import Decision
from policies.judge.verdict import Verdict
from policies.model.policy import Action, Consistency, GPUPolicy
from policies.model.policyset import PolicySet
from policies.quantity import parse_quantity
from webhook.cluster.reservations import PodRef, Reservation, Reservations
from webhook.cluster.shared_quota import LedgerUnavailable, SharedReservations
from webhook.metrics import TRACKED_PODS

STRICT_ATTEMPTS = 8
log = logging.getLogger("gpu_admission.usage")


class PodUsageTracker:
    def __init__(
        self,
        policy_set: Callable[[], PolicySet | None],
        clock: Callable[[], float] = time.monotonic,
        ttl: float = 30.0,
        cluster: Callable[[], ClusterState] = lambda: NO_CLUSTER,
        shared: SharedReservations | None = None,
    ) -> None:
        self._policy_set = policy_set
        self._cluster = cluster
        self._clock = clock
        self.ttl = ttl
        self.confirm_after = 5.0  # seconds without the watch showing a pod before asking for it
        self.shared = shared
        self.capacity = CapacityLedger(CATALOG)
        self._lock = threading.RLock()
        self._counts = PodCounts()
        self._reservations = Reservations()
        self._gone: dict[str, float] = {}  # uids of pods deleted lately: their shared reservations are spent

    # -- UsageSource -------------------------------------------------------------------------
    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        key = (policy.name, scope)
        with self._lock:
            self._expire()
            held = self._counts.ledger.usage(policy, scope)
            if self.shared is not None and _strict(policy):
                return held + self.shared.pending(key, self._seen)
            return held + self._reservations.total(key)

    @property
    def reservations(self) -> int:
        with self._lock:
            self._expire()
            return len(self._reservations)

    @property
    def tracked_pods(self) -> int:
        return len(self._counts.pods)

    def _seen(self, uid: str) -> bool:
        """Whether this replica's watch has shown the pod: counted now, or deleted lately."""
        return uid in self._counts.pods or uid in self._gone

    # -- admission -----------------------------------------------------------------------------
    def admit(self, decide: Callable[[], Decision], pod: PodRef, dry_run: bool) -> Decision:
        """Decide and, if allowed for real, reserve, as one step (retried while a strict Lease moves).

        A strict quota whose Lease cannot be read or written denies: it cannot be judged.
        """
        try:
            return self._admit(decide, pod, dry_run)
        except LedgerUnavailable as error:
            with self._lock:
                self._reservations.release(pod.key)
            return _denied(Decision(False), f"strict quota ledger unreachable, denied to be safe: {error}")

    def _admit(self, decide: Callable[[], Decision], pod: PodRef, dry_run: bool) -> Decision:
        decision = Decision(True)
        for _ in range(STRICT_ATTEMPTS):
            with self._lock:
                self._expire()
                decision = decide()
                if dry_run or not decision.allowed or decision.usage.empty or not decision.charges:
                    return decision
                strict = self._strict_charges(decision.charges)
                local = tuple(c for c in decision.charges if c not in strict)
                now = self._clock()
                self._reservations.add(Reservation(pod, local, decision.usage, now + self.ttl, now, strict))
                if not strict:
                    return decision
            assert self.shared is not None
            if self.shared.reserve(strict, pod, decision.usage):
                return decision
            with self._lock:
                self._reservations.release(pod.key)
        return _denied(decision, f"strict quota ledger kept changing under {STRICT_ATTEMPTS} attempts; try again")

    # -- forged reviews ------------------------------------------------------------------------------
    def sweep_forged(self, exists: Callable[[PodRef], bool | None], limit: int = 20) -> int:
        """Release reservations whose pod the API server does not have (`exists` False) once
        `confirm_after` has passed without the watch showing it: a review forged for a pod that
        is never created holds its budget for seconds, not the whole TTL. At most `limit` looks
        a call; an unanswered look is tried again later. Returns how many were released."""
        with self._lock:
            self._expire()
            due = self._reservations.unconfirmed(self._clock() - self.confirm_after, limit)
        released = 0
        for reservation in due:
            found = exists(reservation.pod)
            with self._lock:
                current = self._reservations.get(reservation.pod.key) is reservation
                if current and found is None:
                    self._reservations.unchecked(reservation.pod.key)
                if not current or found is not False:
                    continue
                self._reservations.release(reservation.pod.key)
            if reservation.strict and self.shared is not None:
                self.shared.withdraw(reservation.strict, reservation.pod)
            released += 1
            log.warning(
                "reservation released: its pod was never created",
                extra={"fields": {"pod": reservation.pod.key, "namespace": reservation.pod.namespace}},
            )
        return released

    def _strict_charges(self, charges: Charges) -> Charges:
        policy_set = self._policy_set()
        if self.shared is None or policy_set is None:
            return ()
        return tuple(c for c in charges if (p := policy_set.by_name(c[0])) is not None and _strict(p))

    def _expire(self) -> None:
        now = self._clock()
        self._reservations.expire(now)
        while self._gone and next(iter(self._gone.values())) <= now:
            del self._gone[next(iter(self._gone))]

    # -- pod events ----------------------------------------------------------------------------
    def observe(self, kind: str, raw: dict[str, Any]) -> None:
        metadata = raw.get("metadata") or {}
        namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        uid = str(metadata.get("uid") or "")
        key = _pod_key(metadata)
        held = None if kind == "DELETED" else self._held(raw)
        with self._lock:
            old = self._counts.remove(key)
            if old is not None and old.node is not None:
                self.capacity.use(old.node, old.gpus, -1)
            if held is not None:
                held = self._counts.add(key, held)
                if held.node is not None:
                    self.capacity.use(held.node, held.gpus)
            if kind == "DELETED":
                if uid:
                    self._gone[uid] = self._clock() + self.ttl
            else:
                self._reservations.claim(namespace, name, uid)
        TRACKED_PODS.set(len(self._counts.pods))

    def replace_all(self, pods: Iterable[dict[str, Any]]) -> None:
        """A full relist: counters rebuilt from the pods as they are now (off the lock, so
        admissions go on meanwhile), then swapped in; listed pods claim their reservations."""
        counts = PodCounts()
        for raw in pods:
            held = self._held(raw)
            if held is not None:
                counts.add(_pod_key(raw.get("metadata") or {}), held)
        uses = node_uses((held.node, held.gpus) for held in counts.pods.values())
        with self._lock:
            self._counts = counts
            self.capacity.replace_uses(uses)
            self._reservations.release_seen(counts.pods)
        TRACKED_PODS.set(len(counts.pods))

    # -- node events: GPU capacity ------------------------------------------------------------
    def observe_node(self, kind: str, raw: dict[str, Any]) -> None:
        name, product, allocatable = node_gpus(raw, parse_quantity)
        with self._lock:
            if kind == "DELETED":
                self.capacity.remove_node(name)
            else:
                self.capacity.set_node(name, product, allocatable)

    def replace_nodes(self, nodes: Iterable[dict[str, Any]]) -> None:
        parsed = [node_gpus(raw, parse_quantity) for raw in nodes]
        with self._lock:
            for name in self.capacity.nodes():
                self.capacity.remove_node(name)
            for name, product, allocatable in parsed:
                self.capacity.set_node(name, product, allocatable)
            self.capacity.mark_synced()

    def _held(self, raw: dict[str, Any]) -> Held | None:
        """What a watched pod holds. One this engine cannot read is left out and logged: raised,
        it would end every relist at that pod and keep the pod watch from ever syncing."""
        policy_set = self._policy_set()
        if policy_set is None:
            return None
        try:
            return held_by(raw, policy_set, parse_quantity, self._cluster())
        except InputError as error:
            metadata = raw.get("metadata") or {}
            where = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
            log.warning("pod left out of quota counts", extra={"fields": {"pod": where, "error": str(error)}})
            return None


def _pod_key(metadata: dict[str, Any]) -> str:
    """Pods are counted by uid (a deleted and recreated pod of the same name is another pod)."""
    return str(metadata.get("uid") or f"{metadata.get('namespace', '')}/{metadata.get('name', '')}")


def _strict(policy: GPUPolicy) -> bool:
    return policy.quota is not None and policy.quota.consistency is Consistency.STRICT


def _denied(decision: Decision, message: str) -> Decision:
    policy = decision.policies[0] if decision.policies else ""
    verdict = Verdict(policy, "quota.consistency", "spec.quota.consistency", message, Action.DENY)
    return decision._replace(allowed=False, verdicts=(*decision.verdicts, verdict))
