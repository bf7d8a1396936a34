"""How the counters read a pod: what it holds (policies.judge.pod_facts) and the budgets it is
charged to by the policy set in force and the namespace labels the watch has shown. Holds no
lock and no count: webhook.cluster.quota.counting.pod_counting keeps the counts, under its lock.

Most pods' events change nothing their records read (the kubelet's status reports, the
scheduler's binding: only the node). Per pod read from its JSON alone, a 16-byte digest of what
was read (policies.review.pod.pod_fingerprint) is kept here; an event with the same digest takes
the record the counters hold, its node put in, instead of reading the pod again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from policies import (
    Charges,
    ClusterState,
    InputError,
    Needs,
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
from webhook.cluster.quota.counting.reservations import AsUpdated, Reservation

log = logging.getLogger("gpu_admission.usage")


class PodReading:
    """Pods read for counting: their facts, their budgets, and the digests of pods read alone
    (written by the pod watch's thread only)."""

    def __init__(
        self,
        policy_set: Callable[[], PolicySet | None],
        namespace_labels: Callable[[str], Mapping[str, str] | None],
        cluster: ClusterState,
    ) -> None:
        self.policy_set = policy_set  # the policies in force, if loaded
        self._namespace_labels = namespace_labels  # as the namespace watch has shown them
        self.cluster = cluster  # the view the counters are part of: DRA claims pods name
        self.kept = Needs()  # what the counted pods' records were read for (their last relist's)
        # pod key -> digest of what its facts were read from, where they were read from it alone
        self.digests: dict[str, bytes] = {}

    def needs(self) -> Needs:
        """What the policy set in force reads of pods (nothing loaded: nothing)."""
        policy_set = self.policy_set()
        return needs_of(policy_set) if policy_set is not None else Needs()

    def quotas(self, keys: Charges) -> dict[tuple[str, str], Quota]:
        """The quota of each budget of `keys` in the policy set in force (none: left out)."""
        policy_set = self.policy_set()
        found = {key: policy.quota for key in keys if policy_set and (policy := policy_set.by_name(key[0]))}
        return {key: quota for key, quota in found.items() if quota is not None}

    def event_facts(self, key: str, raw: dict[str, Any], counted: PodFacts | None) -> PodFacts | None:
        """What a pod holds after an event: `counted` (the record counted for it), its node put
        in, if nothing it was read from changed."""
        known = self.digests.get(key)
        if known is None and not may_hold(raw):  # most pods: nothing to read, nor a digest to keep
            return None
        digest = digest_of(raw, self.kept)
        if digest is not None and known == digest:
            node = (raw.get("spec") or {}).get("nodeName")
            return moved(counted, node if isinstance(node, str) and node else None)
        return self.read(key, raw, self.kept, self.digests, digest)

    def read(
        self, key: str, raw: dict[str, Any], needs: Needs, digests: dict[str, bytes], digest: bytes | None
    ) -> PodFacts | None:
        """What a watched pod holds, its `digest` kept in `digests` if read from the pod alone.
        One this engine cannot read is left out and logged: raised, it would end every relist
        at that pod and keep the pod watch from ever syncing."""
        digests.pop(key, None)
        try:
            facts, alone = read_facts(raw, needs, self.cluster)
        except InputError as error:
            metadata = raw.get("metadata") or {}
            where = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
            log.warning("pod left out of quota counts", extra={"fields": {"pod": where, "error": str(error)}})
            return None
        if alone and digest is not None:
            digests[key] = digest
        return facts

    def charge(self, facts: PodFacts) -> Charges:
        """Budgets by the policy set in force and the namespace labels the watch has shown: never
        read from the API server here (this runs under the counters' lock); a namespace whose
        labels arrive later has its pods charged again then (recharge_namespaces)."""
        policy_set = self.policy_set()
        if policy_set is None:
            return ()
        return charges_of(facts, policy_set, self._namespace_labels(facts.namespace))

    def reservation_charges(self, reservation: Reservation) -> Charges | None:
        """The local budgets a reserved pod is charged to by the policy set in force (its strict
        ones stay in the Leases they were written to); None where it cannot be said."""
        policy_set = self.policy_set()
        if reservation.raw is None or policy_set is None:
            return None
        try:
            facts = facts_of(reservation.raw, needs_of(policy_set), self.cluster)
        except InputError:
            return None  # unreadable: the reservation stays charged as it is
        charges = () if facts is None else self.charge(facts)
        return tuple(c for c in charges if c not in reservation.strict)

    def as_updated(self, raw: Mapping[str, Any] | None) -> AsUpdated:
        """An UPDATE's pod `raw` as it stands: the budgets it is in by the policy set in force,
        and what charging reads of it under the needs the counted records were read for. Reads
        the pod alone, and only what the watches keep: no lock."""
        policy_set = self.policy_set()
        if raw is None or policy_set is None:
            return AsUpdated()
        kept, wanted = self.kept, needs_of(policy_set)
        facts = self._read_alone(raw, kept)
        # Charged as the set in force reads it: read again where the kept facts lack what it reads
        # (a new set, its pods not listed again yet).
        charging = facts if kept.covers(wanted) else self._read_alone(raw, wanted)
        return AsUpdated(() if charging is None else self.charge(charging), facts)

    def _read_alone(self, raw: Mapping[str, Any], needs: Needs) -> PodFacts | None:
        """What the pod holds; None where it holds nothing or cannot be read (it holds nothing
        that can be said)."""
        try:
            return facts_of(raw, needs, self.cluster)
        except InputError:
            return None


def digest_of(raw: dict[str, Any], needs: Needs) -> bytes | None:
    """16 bytes of what a pod's facts are read from (policies.review.pod.pod_fingerprint); None
    while a quota policy's CEL condition is needed (it may read any field: nothing is kept)."""
    if needs.conditions:
        return None
    fingerprint = pod_fingerprint(raw)
    return None if fingerprint is None else hashlib.blake2b(fingerprint, digest_size=16).digest()
