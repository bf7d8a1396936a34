"""Usage held per (policy, scope), filled from pods already in the cluster.

The offline `validate --cluster-state` fills it from a v1 List of pods; admitted pods are charged
as they go, so a file of several pods is judged as the API server would admit them, one by one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from policies.cluster import NO_CLUSTER, ClusterState
from policies.errors import InputError
from policies.judge.quota import scope_of
from policies.judge.usage import EMPTY, Usage, counts_against_quota, gpus_held, pod_usage
from policies.model.policy import GPUPolicy
from policies.model.policyset import PolicySet
from policies.mutate.document import JSON
from policies.pod import parse_pod
from policies.quantity import QuantityParser
from policies.request import RequestInfo


class Ledger:
    def __init__(self) -> None:
        self._held: dict[tuple[str, str], Usage] = {}

    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        return self._held.get((policy.name, scope), EMPTY)

    def charge(self, charges: Iterable[tuple[str, str]], usage: Usage) -> None:
        for key in charges:
            self._held[key] = self._held.get(key, EMPTY) + usage

    def discharge(self, charges: Iterable[tuple[str, str]], usage: Usage) -> None:
        for key in charges:
            left = self._held.get(key, EMPTY) - usage
            if left.holds_anything:
                self._held[key] = left
            else:
                self._held.pop(key, None)

    @classmethod
    def from_pods(
        cls,
        pods: Iterable[JSON],
        policy_set: PolicySet,
        parse_quantity: QuantityParser,
        cluster: ClusterState = NO_CLUSTER,
    ) -> Ledger:
        ledger = cls()
        for i, raw in enumerate(pods):
            try:
                held = held_by(raw, policy_set, parse_quantity, cluster)
            except InputError as error:
                raise error.in_document(f"cluster state item {i + 1}") from None
            if held is not None:
                ledger.charge(held.charges, held.usage)
        return ledger


Charges = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Held:
    """What one existing pod holds: usage under its (policy, scope) budgets, and GPUs on its node."""

    charges: Charges
    usage: Usage
    node: str | None
    gpus: tuple[tuple[str, int], ...]  # GPU resource -> amount the scheduler reserves


def held_by(
    raw: JSON, policy_set: PolicySet, parse_quantity: QuantityParser, cluster: ClusterState = NO_CLUSTER
) -> Held | None:
    """What an existing pod holds; None if it holds no GPU or no longer holds what it had."""
    view = parse_pod(raw, parse_quantity)
    if not view.holds_gpu or not counts_against_quota(view):
        return None
    request = RequestInfo(namespace=view.namespace)
    data = request.cel_input(raw)
    labels = cluster.namespace_labels(view.namespace)
    matched = policy_set.matching(view.namespace, view.labels, data, labels).policies
    usage = pod_usage(view, policy_set.catalog)
    charges = tuple((p.name, scope_of(p.quota, view.namespace)) for p in matched if p.quota)
    return Held(charges, usage, view.node_name, gpus_held(view))


class PodCounts:
    """Counters fed by pods one at a time: usage per (policy, scope), and each pod's record.

    Per pod only a reference to an interned Held is kept (pods of one template share one), so
    the cost grows with the pods' keys, not their objects.
    """

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.pods: dict[str, Held] = {}
        self._interned: dict[tuple[object, ...], Held] = {}

    def add(self, key: str, held: Held) -> Held:
        """Count a pod (forget what was counted for it before first); returns the interned record."""
        self.remove(key)
        u = held.usage
        shape = (held.charges, u.gpu_equivalents, tuple(u.slices.items()), u.gpus, u.shared_equivalents)
        held = self._interned.setdefault((*shape, held.node, held.gpus), held)
        self.pods[key] = held
        self.ledger.charge(held.charges, held.usage)
        return held

    def remove(self, key: str) -> Held | None:
        held = self.pods.pop(key, None)
        if held is not None:
            self.ledger.discharge(held.charges, held.usage)
        return held
