"""Which of a namespace's policies a pod's labels and fields leave to examine.

Each policy is indexed by one label it cannot match without, a `podSelector` pair (`matchLabels`
or a one-value `In`), or else by a field of the object its CEL match condition requires to hold a
string (`required_field`: a label, the pod's name, an annotation, any `object.a.b['c']`). A pod
then costs a dict lookup per label of its own and one per field path conditions name, not a check
per policy, for the policies these exclude: 990 of them cost what 10 do, whatever field their
conditions read. A policy indexed by a condition is still evaluated for a pod without that field,
or with a value there that is no string (there its condition is an error or false, decided by CEL
as ever), and whenever conditions are not evaluated but looked up (`holding`).
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.model.cel_fields import LABELS_PATH, FieldPath, required_field
from policies.model.policy import GPUPolicy
from policies.model.selectors import Operator


def _selector_pair(policy: GPUPolicy) -> tuple[str, str] | None:
    selector = policy.match.pod_selector
    if selector is None:
        return None
    for requirement in selector.requirements:
        if requirement.operator is Operator.IN and len(requirement.values) == 1:
            return requirement.key, next(iter(requirement.values))
    return None


class Candidates:
    __slots__ = ("all", "_free", "_by_pair", "_by_condition", "_position")

    def __init__(self, policies: tuple[GPUPolicy, ...]) -> None:
        self.all = policies  # in precedence order
        free: list[GPUPolicy] = []
        by_pair: dict[tuple[str, str], list[GPUPolicy]] = {}
        by_condition: dict[FieldPath, dict[str, list[GPUPolicy]]] = {}
        for policy in policies:
            pair = _selector_pair(policy)
            if pair is not None:
                by_pair.setdefault(pair, []).append(policy)
                continue
            condition = policy.match.condition
            field = required_field(condition.source) if condition is not None else None
            if field is not None:
                by_condition.setdefault(field[0], {}).setdefault(field[1], []).append(policy)
                continue
            free.append(policy)
        self._free = tuple(free)
        self._by_pair = {pair: tuple(found) for pair, found in by_pair.items()}
        self._by_condition = {key: {v: tuple(p) for v, p in values.items()} for key, values in by_condition.items()}
        self._position = {policy.name: i for i, policy in enumerate(policies)}

    def for_pod(
        self, labels: Mapping[str, str], conditions_evaluated: bool = True, obj: object = None
    ) -> tuple[GPUPolicy, ...]:
        """The policies a pod with `labels` (and `obj` as CEL's `object` reads it, where fields
        other than labels are indexed) may match, in precedence order."""
        if not self._by_pair and not self._by_condition:
            return self.all
        found = list(self._free)
        if self._by_pair:
            for item in labels.items():
                more = self._by_pair.get(item)
                if more:
                    found += more
        for path, by_value in self._by_condition.items():
            value = _field(path, labels, obj)
            if value is None or not conditions_evaluated:
                for group in by_value.values():
                    found += group
            else:
                more = by_value.get(value)
                if more:
                    found += more
        if len(found) == len(self.all):
            return self.all
        position = self._position
        found.sort(key=lambda p: position[p.name])
        return tuple(found)


def _field(path: FieldPath, labels: Mapping[str, str], obj: object) -> str | None:
    """The string at `path` of the object (a label from `labels`), None where there is none."""
    if len(path) == 3 and path[:2] == LABELS_PATH:
        return labels.get(path[2])
    found = obj
    for key in path:
        if type(found) is not dict:
            return None
        found = found.get(key)
    return found if type(found) is str else None
