"""The pods a replica counts: usage per (policy, scope) fed by pod events and relists, and the
reservations of pods admitted but not seen yet, under one lock that this object alone takes (a
plain lock: nothing it calls takes it again). What a budget holds is read from here as a snapshot
(`counts`, policies.judge.budgets.BudgetCounts), and admission settles a pod on one and reserves
it as one step (`settle`); webhook.cluster.quota.budget_holdings and
webhook.cluster.quota.quota_admission ask, and never reach into the counts.

Only counters are kept, never pod objects: per pod, a reference to an interned record of what it
holds and what charging reads of it (policies.judge.pod_facts), so 100,000 pods of a few dozen
shapes cost little more than their keys, and a new policy set is charged from those records
(`recharge`) without listing the pods again unless it matches on something they do not keep.

Most pods hold no GPU: one whose JSON shows no way to hold anything (policies.judge.pod_facts
`may_hold`: no resource with a domain, no DRA claims, no share annotation) is not read at all;
most of the other pods' events are known unchanged by their digest
(policies.judge.pod_reading).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from policies import (
    NO_CLUSTER,
    BudgetCounts,
    BudgetReads,
    Charges,
    ClusterState,
    Decision,
    InputError,
    Ledger,
    PodCounts,
    PodFacts,
    PodReading,
    PolicySet,
    Usage,
)
from webhook.cluster.quota.counting.beyond_watch import NO_LEASES, BeyondWatch, Key, LeaseEntries
from webhook.cluster.quota.counting.reservations import Reservation, Reservations
from webhook.cluster.watches.nodes import Held, NodeCapacity
from webhook.metrics import TRACKED_PODS

log = logging.getLogger("gpu_admission.usage")
T = TypeVar("T")
# How admission holds a pod once settled (webhook.cluster.quota.quota_admission): given the
# settled decision and the pod's reservation already held under the same key, the reservation
# to hold (None: none) and the strict budgets left to write to their Leases. Runs under the lock.
Hold = Callable[[Decision, Reservation | None], tuple[Reservation | None, Charges]]


class PodCounting:
    """Counters fed by pod events, and reservations, under one lock taken only here."""

    def __init__(
        self,
        policy_set: Callable[[], PolicySet | None],
        clock: Callable[[], float] = time.monotonic,
        ttl: float = 30.0,
        namespace_labels: Callable[[str], Mapping[str, str] | None] = lambda namespace: None,
        nodes: NodeCapacity | None = None,
        cluster: ClusterState = NO_CLUSTER,
    ) -> None:
        self.reading = PodReading(policy_set, namespace_labels, cluster)  # pods read, and charged
        self.clock = clock
        self.ttl = ttl  # how long a reservation counts without its pod seen
        self.nodes = nodes or NodeCapacity()  # what the pods it counts hold on their nodes
        self._lock = threading.Lock()
        self._counts = PodCounts(self.reading.charge)
        self._reservations = Reservations()
        self._gone = GoneUids()  # pods deleted or finished lately: their shared reservations are spent
        self._tracked = TrackedGauge()

    def counted(self) -> Ledger:
        """What the pods the watch has shown hold (no reservations): the quota view's `used`."""
        return self._counts.ledger

    @property
    def tracked_pods(self) -> int:
        return len(self._counts.pods)

    @property
    def shapes(self) -> int:
        """Distinct records the tracked pods share."""
        return self._counts.shapes

    # -- what the budgets hold, read and reserved ------------------------------------------------
    def counts(
        self,
        reads: BudgetReads,
        leases: LeaseEntries = NO_LEASES,
        also: Callable[[], T] | None = None,
        counted: bool = True,
    ) -> tuple[BudgetCounts, T | None]:
        """A snapshot of the budgets `reads` names: what the watch shows (`counted`: else left
        out), and what this replica's reservations and the Leases (`leases`, read before) hold
        beyond it; with what `also` reads in the same step (this replica's shares: an admission
        from one moves what it takes to a reservation under this lock, so read apart it would be
        in neither)."""
        with self._lock:
            _expire(self._reservations, self._gone, self.clock())  # what has run out is not read
            ledger = self._counts.ledger if counted else Ledger()
            return ledger.counts(reads, self._beyond_locked(reads, leases)), also() if also is not None else None

    def settle(
        self, judged: Decision, reads: BudgetReads, leases: LeaseEntries, key: str, hold: Hold
    ) -> tuple[Decision, Charges]:
        """`judged` settled on a snapshot of the budgets it reads (`reads`, policies.judge.budgets),
        and the pod (reservation key `key`) held as `hold` says, as one step: concurrent
        admissions in one process never admit more than a budget allows."""
        with self._lock:
            _expire(self._reservations, self._gone, self.clock())  # what has run out is not read
            decision = judged.settle_on(self._counts.ledger, reads, self._beyond_locked(reads, leases))
            held, strict = hold(decision, self._reservations.get(key))
            if held is not None:
                self._reservations.add(held)
            return decision, strict

    def release(self, key: str) -> None:
        """The reservation under `key` is no longer held (its admission judged again, or denied)."""
        with self._lock:
            self._reservations.release(key)

    def reserved_pods(self) -> int:
        """Pods reserved for and not seen yet."""
        with self._lock:
            _expire(self._reservations, self._gone, self.clock())
            return len(self._reservations)

    def unconfirmed(self, made_before: float, limit: int) -> list[Reservation]:
        """At most `limit` reservations made before `made_before` whose pod the watch has not
        shown, not asked about yet (webhook.cluster.quota.quota_admission.sweep_forged)."""
        with self._lock:
            _expire(self._reservations, self._gone, self.clock())
            return self._reservations.unconfirmed(made_before, limit)

    def confirmed(self, reservation: Reservation, found: bool | None) -> bool:
        """What the API server said of `reservation`'s pod (`found`; None: no answer, asked
        again later): released if it has no such pod. Whether it was (and still held)."""
        with self._lock:
            if self._reservations.get(reservation.pod.key) is not reservation:
                return False
            if found is None:
                self._reservations.unchecked(reservation.pod.key)
            if found is not False:
                return False
            self._reservations.release(reservation.pod.key)
            return True

    def budgets_held(self) -> list[tuple[Key, Usage]]:
        """Each budget the counted pods hold something in, and what."""
        with self._lock:
            ledger = self._counts.ledger
            policy_set = self.reading.policy_set()
            found = []
            for name, scope in ledger.held():
                policy = policy_set.by_name(name) if policy_set is not None else None
                if policy is not None:
                    found.append(((name, scope), ledger.usage(policy, scope)))
            return found

    # -- fed by the pod watch --------------------------------------------------------------------
    def observe(self, kind: str, raw: dict[str, Any]) -> None:
        metadata = raw.get("metadata") or {}
        namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        uid = str(metadata.get("uid") or "")
        key = _pod_key(metadata)
        if kind == "DELETED":
            facts = None
            self.reading.digests.pop(key, None)
        else:  # the watch thread alone writes the pods' records: read here, off the lock
            facts = _read(raw, self.reading.event_facts, key, raw, self._counts.pods.get(key))
        with self._lock:
            if facts is None or self._counts.pods.get(key) is not facts:  # else: counted as it is
                old = self._counts.remove(key)
                if facts is not None:
                    facts = self._counts.add(key, facts)
                self.nodes.pod_moved(_held(old), _held(facts))
            if uid and (kind == "DELETED" or self.reading.finished(raw)):
                # Deleted, or finished (charged nothing now): its shared reservation is spent at
                # once, not left to count again until it expires. Not a running pod that holds
                # nothing: it is not gone (its UPDATEs' reservations count), and each of its
                # events would set it again for as long as it runs.
                self._gone.spend(uid, self.clock() + self.ttl)
            if kind != "DELETED":
                self._reservations.claim(namespace, name, uid)
                self._reservations.shown(uid, facts)
            self._tracked.set(len(self._counts.pods))

    def replace_all(self, pods: Iterable[dict[str, Any]]) -> None:
        """A full relist: counters rebuilt from the pods as they are now (off the lock, so
        admissions go on meanwhile), then swapped in; listed pods claim their reservations."""
        needs = self.reading.needs()
        counts = PodCounts(self.reading.charge)
        digests: dict[str, bytes] = {}
        spent: list[str] = []  # listed finished: their reservations are spent
        for raw in pods:
            metadata = raw.get("metadata") or {}
            key = _pod_key(metadata)
            facts = _read(raw, self.reading.read, key, raw, needs, digests)
            if facts is not None:
                counts.add(key, facts)
            elif self.reading.finished(raw) and (uid := str(metadata.get("uid") or "")):
                spent.append(uid)
        with self._lock:
            self._counts = counts
            self.reading.kept, self.reading.digests = needs, digests
            counts.recharge(self.reading.charge)  # a policy set swapped in meanwhile: charged by it
            self._reservations.recharge(self.reading.kept_charges)
            self.nodes.replace_pods((facts.node, facts.gpus) for facts in counts.pods.values())
            self._reservations.release_seen(counts.pods)
            for uid in self._reservations.updated_uids():
                self._reservations.shown(uid, counts.pods.get(uid))
            until = self.clock() + self.ttl
            for uid in spent:
                self._gone.spend(uid, until)
            self._tracked.set(len(counts.pods))

    def recharge(self) -> bool:
        """Charge the counted pods by the policy set now in force, from what is kept of them.
        False when the set matches on pod labels or conditions the kept facts lack: the pods
        must be listed again (replace_all)."""
        if self.reading.policy_set() is None:
            return True
        wanted = self.reading.needs()
        with self._lock:
            if not self.reading.kept.covers(wanted):
                return False
            moved = self._counts.recharge(self.reading.charge)
            moved += self._reservations.recharge(self.reading.kept_charges)
            shapes = self._counts.shapes
        log.info("pods charged by the new policy set", extra={"fields": {"moved": moved, "shapes": shapes}})
        return True

    def recharge_namespaces(self, namespaces: Iterable[str]) -> None:
        """The labels of `namespaces` changed: their pods may match other namespaceSelectors."""
        changed = frozenset(namespaces)
        with self._lock:
            self._counts.recharge(self.reading.charge, changed)
            self._reservations.recharge(self.reading.kept_charges, changed)

    # -- under the lock ----------------------------------------------------------------------------
    def _beyond_locked(self, reads: BudgetReads, leases: LeaseEntries) -> dict[Key, list[Usage]]:
        """What each budget of `reads` holds beyond what the watch shows, item by item (the lock
        held)."""
        beyond = BeyondWatch(self._counts, self._reservations, self._gone, leases)
        return {(policy.name, scope): beyond.added((policy.name, scope)) for policy, scope in reads.budgets}


class TrackedGauge:
    """The gauge of counted pods, written only when it changes: most events (status reports,
    pods with no GPU) change no count, and under several workers a set writes a file."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = -1

    def set(self, count: int) -> None:
        if count != self._count:
            self._count = count
            TRACKED_PODS.set(count)


class GoneUids:
    """Uids of pods the watch has shown deleted or finished lately, each until when (in the order
    those times run out, which `expire` reads from the front)."""

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def __contains__(self, uid: object) -> bool:
        return uid in self._until

    def spend(self, uid: str, until: float) -> None:
        """`uid` gone until `until`, put last (a dict keeps a key's place when it is set again)."""
        self._until.pop(uid, None)
        self._until[uid] = until

    def expire(self, now: float) -> None:
        until = self._until
        while until and next(iter(until.values())) <= now:
            del until[next(iter(until))]


def _expire(reservations: Reservations, gone: GoneUids, now: float) -> None:
    """Forget reservations past their time, and pods gone long enough (the lock held)."""
    reservations.expire(now)
    gone.expire(now)


def _held(facts: PodFacts | None) -> Held | None:
    return None if facts is None or facts.node is None else (facts.node, facts.gpus)


def _read(raw: dict[str, Any], read: Callable[..., PodFacts | None], *arguments: Any) -> PodFacts | None:
    """What `read(*arguments)` finds the pod `raw` holds. One the engine cannot read is left out
    and logged: raised, it would end every relist at that pod and keep the pod watch from ever
    syncing. (Called for every pod event: no closure is made for it.)"""
    try:
        return read(*arguments)
    except InputError as error:
        metadata = raw.get("metadata") or {}
        where = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
        log.warning("pod left out of quota counts", extra={"fields": {"pod": where, "error": str(error)}})
        return None


def _pod_key(metadata: dict[str, Any]) -> str:
    """Pods are counted by uid (a deleted and recreated pod of the same name is another pod)."""
    return str(metadata.get("uid") or f"{metadata.get('namespace', '')}/{metadata.get('name', '')}")
