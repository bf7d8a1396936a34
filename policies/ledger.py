"""Usage held per (policy, scope), filled from pods already in the cluster.

The offline `validate --cluster-state` fills it from a v1 List of pods; admitted pods are charged
as they go, so a file of several pods is judged as the API server would admit them, one by one.
"""

from __future__ import annotations

from collections.abc import Iterable

from policies.document import JSON
from policies.errors import InputError
from policies.fields import QuantityParser
from policies.model import GPUPolicy
from policies.mutation import plan_mig
from policies.pod import parse_pod
from policies.policyset import PolicySet
from policies.quota import scope_of
from policies.request import RequestInfo
from policies.usage import EMPTY, Usage, counts_against_quota, pod_usage


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
            if left.pods > 0 or left.gpu_equivalents > 0:
                self._held[key] = left
            else:
                self._held.pop(key, None)

    @classmethod
    def from_pods(cls, pods: Iterable[JSON], policy_set: PolicySet, parse_quantity: QuantityParser) -> Ledger:
        ledger = cls()
        for i, raw in enumerate(pods):
            try:
                held = holdings(raw, policy_set, parse_quantity)
            except InputError as error:
                raise error.in_document(f"cluster state item {i + 1}") from None
            if held is not None:
                ledger.charge(*held)
        return ledger


Charges = tuple[tuple[str, str], ...]


def holdings(raw: JSON, policy_set: PolicySet, parse_quantity: QuantityParser) -> tuple[Charges, Usage] | None:
    """What an existing pod holds and under which (policy, scope) budgets; None if it holds nothing."""
    view = parse_pod(raw, parse_quantity)
    if not view.holds_gpu or not counts_against_quota(view):
        return None
    request = RequestInfo(namespace=view.namespace)
    data = request.cel_input(raw)
    matched = policy_set.matching(view.namespace, view.labels, data).policies
    usage = pod_usage(view, policy_set.catalog, plan_mig(view, policy_set, matched, parse_quantity).models)
    charges = tuple((p.name, scope_of(p.quota, view.namespace)) for p in matched if p.quota)
    return (charges, usage) if charges else None
