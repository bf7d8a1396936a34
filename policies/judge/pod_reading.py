"""How a replica's counters read the pods their watch shows (policies.judge.pod_facts): what a
pod holds and what charging reads of it, the budgets it is charged to by the policy set in force
and the namespace labels known, and, per pod read from its JSON alone, a 16-byte digest of what
was read (policies.review.pod.pod_fingerprint), so an event that changed none of it (a kubelet's
status report, the scheduler's binding) takes the record kept, its node put in, instead of
reading the pod again. Pure: the policy set and the labels come in as callables, the digests
are kept here, and a pod that cannot be read is an InputError for the caller to log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

from policies.errors import InputError
from policies.judge.pod_facts import (
    Charges,
    Needs,
    PodFacts,
    charges_of,
    facts_of,
    may_hold,
    moved,
    needs_of,
    read_facts,
)
from policies.judge.usage import FINISHED_PHASES
from policies.model.policy import Quota
from policies.model.policyset import PolicySet
from policies.review.cluster import ClusterState
from policies.review.document import JSON
from policies.review.pod import pod_fingerprint


class PodReading:
    """Pods read for counting, by the policy set `policy_set` returns (None: none loaded yet) and
    the labels `namespace_labels` knows of a namespace; the digests of pods read alone are kept
    (written by one thread: the pod watch's)."""

    def __init__(
        self,
        policy_set: Callable[[], PolicySet | None],
        namespace_labels: Callable[[str], Mapping[str, str] | None],
        cluster: ClusterState,
    ) -> None:
        self.policy_set = policy_set
        self._namespace_labels = namespace_labels
        self.cluster = cluster  # DRA claims pods name
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

    def event_facts(self, key: str, raw: JSON, counted: PodFacts | None) -> PodFacts | None:
        """What a pod holds after a watch event: `counted` (the record kept for it), its node put
        in, if nothing it was read from changed. Raises InputError for a pod it cannot read."""
        known = self.digests.get(key)
        if known is None and not may_hold(raw):  # most pods: nothing to read, nor a digest to keep
            return None
        digest = digest_of(raw, self.kept)
        if digest is not None and known == digest:
            node = (raw.get("spec") or {}).get("nodeName")
            return moved(counted, node if isinstance(node, str) and node else None)
        return self.read(key, raw, self.kept, self.digests)

    def read(self, key: str, raw: JSON, needs: Needs, digests: dict[str, bytes]) -> PodFacts | None:
        """What a listed pod holds (None: nothing), its digest kept in `digests` if read from the
        pod alone. Raises InputError for a pod it cannot read."""
        digests.pop(key, None)
        if not may_hold(raw):
            return None
        facts, alone = read_facts(raw, needs, self.cluster)
        digest = digest_of(raw, needs) if alone else None
        if digest is not None:
            digests[key] = digest
        return facts

    def charge(self, facts: PodFacts) -> Charges:
        """Budgets by the policy set in force and the namespace labels known: never read from the
        API server (the counters call this under their lock); a namespace whose labels arrive
        later has its pods charged again then."""
        policy_set = self.policy_set()
        if policy_set is None:
            return ()
        return charges_of(facts, policy_set, self._namespace_labels(facts.namespace))

    def kept_charges(self, raw: JSON | None, strict: Charges) -> Charges | None:
        """The budgets a reserved pod kept as `raw` is charged to by the policy set in force but
        `strict` (those stay in the Leases they were written to); None where it cannot be said."""
        policy_set = self.policy_set()
        if raw is None or policy_set is None:
            return None
        readable, facts = self._alone(raw, needs_of(policy_set))
        if not readable:
            return None  # unreadable: the reservation stays charged as it is
        charges = () if facts is None else self.charge(facts)
        return tuple(c for c in charges if c not in strict)

    def as_updated(self, raw: JSON | None) -> tuple[Charges, PodFacts | None]:
        """An UPDATE's pod `raw` as it stands: the budgets it is in by the policy set in force, and
        what charging reads of it under the needs the counted records were read for (None: it
        holds nothing, or cannot be read). Reads the pod alone."""
        policy_set = self.policy_set()
        if raw is None or policy_set is None:
            return (), None
        kept, wanted = self.kept, needs_of(policy_set)
        facts = self._alone(raw, kept)[1]
        # Charged as the set in force reads it: read again where the kept facts lack what it reads
        # (a new set, its pods not listed again yet).
        charging = facts if kept.covers(wanted) else self._alone(raw, wanted)[1]
        return (() if charging is None else self.charge(charging)), facts

    @staticmethod
    def finished(raw: JSON) -> bool:
        """Succeeded or Failed: the pod holds nothing now and never will again. (A status of
        another shape is not finished: one odd pod must never end a relist.)"""
        status = raw.get("status")
        return type(status) is dict and status.get("phase") in FINISHED_PHASES

    def _alone(self, raw: JSON, needs: Needs) -> tuple[bool, PodFacts | None]:
        """Whether the pod can be read, and what it holds (None: nothing)."""
        try:
            return True, facts_of(raw, needs, self.cluster)
        except InputError:
            return False, None


def digest_of(raw: JSON, needs: Needs) -> bytes | None:
    """16 bytes of what a pod's facts are read from (policies.review.pod.pod_fingerprint); None
    while a quota policy's CEL condition is needed (it may read any field: nothing is kept)."""
    if needs.conditions:
        return None
    fingerprint = pod_fingerprint(raw)
    return None if fingerprint is None else hashlib.blake2b(fingerprint, digest_size=16).digest()
