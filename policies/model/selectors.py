"""Kubernetes label selectors (matchLabels, matchExpressions), evaluated over plain label maps.

The kubernetes Python client has models for selectors but no evaluator, so this small one
follows apimachinery's labels.Selector semantics: every requirement must hold.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Operator(enum.Enum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def holds(self, labels: Mapping[str, str]) -> bool:
        if self.operator is Operator.EXISTS:
            return self.key in labels
        if self.operator is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        if self.operator is Operator.IN:
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    # matchLabels, the common case, as plain pairs: checked without a call per requirement.
    _pairs: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    _others: tuple[Requirement, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        single = [r for r in self.requirements if r.operator is Operator.IN and len(r.values) == 1]
        object.__setattr__(self, "_pairs", tuple((r.key, next(iter(r.values))) for r in single))
        object.__setattr__(self, "_others", tuple(r for r in self.requirements if r not in single))

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self._pairs:
            if labels.get(key) != value:
                return False
        return not self._others or all(requirement.holds(labels) for requirement in self._others)


class SelectorError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def parse_selector(raw: object, path: str) -> LabelSelector:
    """A LabelSelector from its JSON form; SelectorError names the offending field path."""
    if not isinstance(raw, Mapping):
        raise SelectorError(path, "must be a mapping with matchLabels and/or matchExpressions")
    unknown = set(raw) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise SelectorError(f"{path}.{sorted(unknown)[0]}", "unknown field")
    requirements: list[Requirement] = []
    labels = raw.get("matchLabels")
    labels = {} if labels is None else labels
    if not isinstance(labels, Mapping):
        raise SelectorError(f"{path}.matchLabels", "must be a mapping of label to value")
    for key, value in labels.items():
        if not isinstance(value, str):
            raise SelectorError(f"{path}.matchLabels.{key}", "value must be a string")
        requirements.append(Requirement(str(key), Operator.IN, frozenset([value])))
    expressions = raw.get("matchExpressions")
    expressions = [] if expressions is None else expressions
    if not isinstance(expressions, list):
        raise SelectorError(f"{path}.matchExpressions", "must be a list")
    for i, expression in enumerate(expressions):
        requirements.append(_parse_requirement(expression, f"{path}.matchExpressions[{i}]"))
    return LabelSelector(tuple(requirements))


def _parse_requirement(raw: object, path: str) -> Requirement:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("key"), str):
        raise SelectorError(path, "needs a key and an operator")
    try:
        operator = Operator(raw.get("operator"))
    except ValueError:
        raise SelectorError(f"{path}.operator", "must be In, NotIn, Exists or DoesNotExist") from None
    values = raw.get("values")
    values = [] if values is None else values
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SelectorError(f"{path}.values", "must be a list of strings")
    if operator in (Operator.IN, Operator.NOT_IN) and not values:
        raise SelectorError(f"{path}.values", f"{operator.value} needs at least one value")
    if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        raise SelectorError(f"{path}.values", f"{operator.value} takes no values")
    return Requirement(raw["key"], operator, frozenset(values))
