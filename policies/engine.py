"""The engine's front door: one call per admission question, no I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass

from policies.document import JSON
from policies.errors import InputError
from policies.fields import QuantityParser
from policies.mutation import MutationResult, mutate_pod
from policies.policyset import PolicySet
from policies.request import RequestInfo


def require_pod(raw: JSON) -> None:
    if not isinstance(raw, dict):
        raise InputError("", "expected a Pod object")
    if raw.get("kind") != "Pod" or raw.get("apiVersion") not in ("v1", None):
        raise InputError("kind", f"expected a v1 Pod, got {raw.get('apiVersion')}/{raw.get('kind')}")


@dataclass(frozen=True)
class Engine:
    policy_set: PolicySet
    parse_quantity: QuantityParser

    def mutate(self, raw: JSON, request: RequestInfo | None = None) -> MutationResult:
        require_pod(raw)
        return mutate_pod(raw, self.policy_set, self.parse_quantity, request)
