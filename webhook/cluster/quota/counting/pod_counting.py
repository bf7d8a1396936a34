"""The pods a replica counts: usage per (policy, scope) fed by pod events and relists, and the
reservations of pods admitted but not seen yet. What a budget holds is read from them by
webhook.cluster.quota.budget_holdings, and admission (webhook.cluster.quota.quota_admission) reserves
here, each under this object's one lock.

Only counters are kept, never pod objects: per pod, a reference to an interned record of what it
holds and what charging reads of it (policies.judge.pod_facts), so 100,000 pods of a few dozen
shapes cost little more than their keys, and a new policy set is charged from those records
(`recharge`) without listing the pods again unless it matches on something they do not keep.

Most pods hold no GPU: one whose JSON shows no way to hold anything (policies.judge.pod_facts
`may_hold`: no resource with a domain, no DRA claims, no share annotation) is not read at all.
Most of the other pods' events change nothing those records read: the kubelet's status reports,
the scheduler's binding (only the node). Per such pod, a 16-byte digest of what was read
(policies.review.pod.pod_fingerprint) is kept too; an event with the same digest takes the record
it has, its node put in, instead of reading the pod again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from policies import (
    FINISHED_PHASES,
    NO_CLUSTER,
    Charges,
    ClusterState,
    InputError,
    Ledger,
    Needs,
    PodCounts,
    PodFacts,
    PolicySet,
    Quota,
    charges_of,
    facts_of,
    may_hold,
    moved,
    needs_of,
    pod_fingerprint,
    read_facts,
)
from webhook.cluster.quota.counting.reservations import AsUpdated, Reservation, Reservations
from webhook.cluster.watches.nodes import Held, NodeCapacity
from webhook.metrics import TRACKED_PODS

log = logging.getLogger("gpu_admission.usage")


class PodCounting:
    """Counters fed by pod events, and reservations, under one lock (`lock`: the budget holdings
    reads and admission checks and reserves under it too; `reservations` is touched only while
    it is held)."""

    def __init__(
        self,
        policy_set: Callable[[], PolicySet | None],
        clock: Callable[[], float] = time.monotonic,
        ttl: float = 30.0,
        namespace_labels: Callable[[str], Mapping[str, str] | None] = lambda namespace: None,
        nodes: NodeCapacity | None = None,
        cluster: ClusterState = NO_CLUSTER,
    ) -> None:
        self.policy_set = policy_set  # the policies in force, if loaded
        self._namespace_labels = namespace_labels  # as the namespace watch has shown them
        self.clock = clock
        self.ttl = ttl  # how long a reservation counts without its pod seen
        self.nodes = nodes or NodeCapacity()  # what the pods it counts hold on their nodes
        self.cluster = cluster  # the view it is part of: DRA claims pods name
        self.lock = threading.RLock()
        self._needs = Needs()  # what the kept facts were made for
        self._counts = PodCounts(self._charge)
        self.reservations = Reservations()
        # uids of pods deleted or finished lately (until when): their shared reservations are spent
        self._gone: dict[str, float] = {}
        self._recharged: list[Callable[[], None]] = []
        # pod key -> digest of what its facts were read from, where they were read from it alone
        self._read: dict[str, bytes] = {}
        self._tracked = -1  # the count TRACKED_PODS was last set to (a set writes the metrics file)

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

    def on_recharged(self, listener: Callable[[], None]) -> None:
        """`listener` runs, under the lock, once the counters are charged by a new policy set."""
        self._recharged.append(listener)

    # -- read under the lock -----------------------------------------------------------------
    def seen(self, uid: str) -> bool:
        """Whether this replica's watch has shown the pod: counted now, or deleted lately."""
        return uid in self._counts.pods or uid in self._gone

    def gone(self, uid: str) -> bool:
        """Whether the watch has shown the pod deleted or finished lately."""
        return uid in self._gone

    def facts(self, uid: str) -> PodFacts | None:
        """What the counted pod `uid` holds, as kept."""
        return self._counts.pods.get(uid)

    def expire(self) -> None:
        """Forget reservations past their time, and pods gone long enough."""
        now = self.clock()
        self.reservations.expire(now)
        while self._gone and next(iter(self._gone.values())) <= now:
            del self._gone[next(iter(self._gone))]

    def reserved_pods(self) -> int:
        """Pods reserved for and not seen yet (the lock taken here)."""
        with self.lock:
            self.expire()
            return len(self.reservations)

    def quotas(self, keys: Charges) -> dict[tuple[str, str], Quota]:
        """The quota of each budget of `keys` in the policy set in force (none: left out)."""
        policy_set = self.policy_set()
        found = {key: policy.quota for key in keys if policy_set and (policy := policy_set.by_name(key[0]))}
        return {key: quota for key, quota in found.items() if quota is not None}

    def observe(self, kind: str, raw: dict[str, Any]) -> None:
        metadata = raw.get("metadata") or {}
        namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        uid = str(metadata.get("uid") or "")
        key = _pod_key(metadata)
        if kind == "DELETED":
            facts = None
            self._read.pop(key, None)
        else:
            facts = self._event_facts(key, raw)
        with self.lock:
            if facts is None or self._counts.pods.get(key) is not facts:  # else: counted as it is
                old = self._counts.remove(key)
                if facts is not None:
                    facts = self._counts.add(key, facts)
                self.nodes.pod_moved(_held(old), _held(facts))
            if uid and (kind == "DELETED" or _finished(raw)):
                # Deleted, or finished (charged nothing now): its shared reservation is spent at
                # once, not left to count again until it expires. Not a running pod that holds
                # nothing: it is not gone (its UPDATEs' reservations count), and each of its
                # events would set it again for as long as it runs.
                self._spend(uid, self.clock() + self.ttl)
            if kind != "DELETED":
                self.reservations.claim(namespace, name, uid)
                self.reservations.shown(uid, facts)
            self._track(len(self._counts.pods))

    def _track(self, count: int) -> None:
        """The gauge of counted pods, written only when it changes: most events (status reports,
        pods with no GPU) change no count, and under several workers a set writes a file."""
        if count != self._tracked:
            self._tracked = count
            TRACKED_PODS.set(count)

    def _spend(self, uid: str, until: float) -> None:
        """`uid` gone until `until`, put last: `_gone` stays in the order its times run out,
        which expire() reads from the front (a dict keeps a key's place when it is set again)."""
        self._gone.pop(uid, None)
        self._gone[uid] = until

    def replace_all(self, pods: Iterable[dict[str, Any]]) -> None:
        """A full relist: counters rebuilt from the pods as they are now (off the lock, so
        admissions go on meanwhile), then swapped in; listed pods claim their reservations."""
        policy_set = self.policy_set()
        needs = needs_of(policy_set) if policy_set is not None else Needs()
        counts = PodCounts(self._charge)
        read: dict[str, bytes] = {}
        spent: list[str] = []  # listed finished: their reservations are spent
        for raw in pods:
            metadata = raw.get("metadata") or {}
            key = _pod_key(metadata)
            facts = self._read_facts(key, raw, needs, read, _digest(raw, needs)) if may_hold(raw) else None
            if facts is not None:
                counts.add(key, facts)
            elif _finished(raw) and (uid := str(metadata.get("uid") or "")):
                spent.append(uid)
        with self.lock:
            self._counts, self._needs, self._read = counts, needs, read
            counts.recharge(self._charge)  # a policy set swapped in meanwhile: charged by it
            self.reservations.recharge(self.reservation_charges)
            self.nodes.replace_pods((facts.node, facts.gpus) for facts in counts.pods.values())
            self.reservations.release_seen(counts.pods)
            for uid in self.reservations.updated_uids():
                self.reservations.shown(uid, counts.pods.get(uid))
            until = self.clock() + self.ttl
            for uid in spent:
                self._spend(uid, until)
            self._track(len(counts.pods))

    def recharge(self) -> bool:
        """Charge the counted pods by the policy set now in force, from what is kept of them.
        False when the set matches on pod labels or conditions the kept facts lack: the pods
        must be listed again (replace_all)."""
        policy_set = self.policy_set()
        if policy_set is None:
            return True
        with self.lock:
            if not self._needs.covers(needs_of(policy_set)):
                return False
            moved = self._counts.recharge(self._charge)
            moved += self.reservations.recharge(self.reservation_charges)
            for listener in self._recharged:
                listener()
            shapes = self._counts.shapes
        log.info("pods charged by the new policy set", extra={"fields": {"moved": moved, "shapes": shapes}})
        return True

    def recharge_namespaces(self, namespaces: Iterable[str]) -> None:
        """The labels of `namespaces` changed: their pods may match other namespaceSelectors."""
        changed = frozenset(namespaces)
        with self.lock:
            self._counts.recharge(self._charge, changed)
            self.reservations.recharge(self.reservation_charges, changed)

    def charges_of(self, key: str) -> Charges:
        """The budgets the counted pod `key` (its uid) is charged to now."""
        with self.lock:
            return self._counts.charges(key)

    def _event_facts(self, key: str, raw: dict[str, Any]) -> PodFacts | None:
        """What a pod holds after an event: the record kept for it if nothing it was read from
        changed (the watch thread alone writes `_read` and the pods' records)."""
        known = self._read.get(key)
        if known is None and not may_hold(raw):  # most pods: nothing to read, nor a digest to keep
            return None
        digest = _digest(raw, self._needs)
        if digest is not None and known == digest:
            node = (raw.get("spec") or {}).get("nodeName")
            return moved(self._counts.pods.get(key), node if isinstance(node, str) and node else None)
        return self._read_facts(key, raw, self._needs, self._read, digest)

    def _read_facts(
        self, key: str, raw: dict[str, Any], needs: Needs, read: dict[str, bytes], digest: bytes | None
    ) -> PodFacts | None:
        """What a watched pod holds, its `digest` kept in `read` if read from the pod alone. One
        this engine cannot read is left out and logged: raised, it would end every relist at that
        pod and keep the pod watch from ever syncing."""
        read.pop(key, None)
        try:
            facts, alone = read_facts(raw, needs, self.cluster)
        except InputError as error:
            metadata = raw.get("metadata") or {}
            where = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
            log.warning("pod left out of quota counts", extra={"fields": {"pod": where, "error": str(error)}})
            return None
        if alone and digest is not None:
            read[key] = digest
        return facts

    def _charge(self, facts: PodFacts) -> Charges:
        """Budgets by the policy set in force and the namespace labels the watch has shown: never
        read from the API server here (this runs under the lock); a namespace whose labels
        arrive later has its pods charged again then (recharge_namespaces)."""
        policy_set = self.policy_set()
        if policy_set is None:
            return ()
        return charges_of(facts, policy_set, self._namespace_labels(facts.namespace))

    def reservation_charges(self, reservation: Reservation) -> Charges | None:
        """The local budgets a reserved pod is charged to by the policy set in force (its strict
        ones stay in the Leases they were written to); None where it cannot be said."""
        charges = self._charges_of_raw(reservation.raw)
        return None if charges is None else tuple(c for c in charges if c not in reservation.strict)

    def as_updated(self, raw: Mapping[str, Any] | None) -> AsUpdated:
        """An UPDATE's pod `raw` as it stands: the budgets it is in by the policy set in force,
        and what charging reads of it under the needs the counters keep. Takes no lock: it
        reads the pod, and only reads what the watches keep."""
        policy_set = self.policy_set()
        if raw is None or policy_set is None:
            return AsUpdated()
        kept, wanted = self._needs, needs_of(policy_set)
        facts = self._read_alone(raw, kept)
        # Charged as the set in force reads it: read again where the kept facts lack what it reads
        # (a new set, its pods not listed again yet).
        charging = facts if kept.covers(wanted) else self._read_alone(raw, wanted)
        return AsUpdated(() if charging is None else self._charge(charging), facts)

    def _charges_of_raw(self, raw: Mapping[str, Any] | None) -> Charges | None:
        policy_set = self.policy_set()
        if raw is None or policy_set is None:
            return None
        try:
            facts = facts_of(raw, needs_of(policy_set), self.cluster)
        except InputError:
            return None  # unreadable: the reservation stays charged as it is
        return () if facts is None else self._charge(facts)

    def _read_alone(self, raw: Mapping[str, Any], needs: Needs) -> PodFacts | None:
        try:
            return facts_of(raw, needs, self.cluster)
        except InputError:
            return None


def _digest(raw: dict[str, Any], needs: Needs) -> bytes | None:
    """16 bytes of what a pod's facts are read from (policies.review.pod.pod_fingerprint); None
    while a quota policy's CEL condition is needed (it may read any field: nothing is kept)."""
    if needs.conditions:
        return None
    fingerprint = pod_fingerprint(raw)
    return None if fingerprint is None else hashlib.blake2b(fingerprint, digest_size=16).digest()


def _held(facts: PodFacts | None) -> Held | None:
    return None if facts is None or facts.node is None else (facts.node, facts.gpus)


def _finished(raw: dict[str, Any]) -> bool:
    """Succeeded or Failed: the pod holds nothing now and never will again. (A status of another
    shape is not finished: one odd pod must never end a relist.)"""
    status = raw.get("status")
    return type(status) is dict and status.get("phase") in FINISHED_PHASES


def _pod_key(metadata: dict[str, Any]) -> str:
    """Pods are counted by uid (a deleted and recreated pod of the same name is another pod)."""
    return str(metadata.get("uid") or f"{metadata.get('namespace', '')}/{metadata.get('name', '')}")
