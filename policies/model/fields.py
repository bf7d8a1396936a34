"""Typed reads of one policy document's fields, collecting every problem with its path and line."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import TypeVar

from policies.errors import PolicyProblem
from policies.model.yamldoc import Document
from policies.quantity import parse_quantity

T = TypeVar("T")
# Exact amounts: a whole number, a decimal, or a fraction with a denominator above zero (the
# grammar the JSON Schema states too; Python's Fraction alone would take "1_0", " 2 ", "1e3").
AMOUNT_PATTERN = r"^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+|[0-9]+/0*[1-9][0-9]*)$"
AMOUNT = re.compile(AMOUNT_PATTERN)


class FieldReader:
    """Reads fields of one document; a wrong field adds a problem and yields a neutral value."""

    def __init__(self, document: Document, policy: str = "") -> None:
        self.document = document
        self.policy = policy
        self.problems: list[PolicyProblem] = []
        self.advice: list[PolicyProblem] = []  # loads anyway; `lint` reports it (policies.model.advice)

    def problem(self, path: str, message: str) -> None:
        self.problems.append(PolicyProblem(self.document.file, self.document.line_of(path), self.policy, path, message))

    def advise(self, path: str, message: str) -> None:
        self.advice.append(PolicyProblem(self.document.file, self.document.line_of(path), self.policy, path, message))

    def mapping(self, raw: object, path: str, allowed: frozenset[str]) -> Mapping[str, object]:
        if raw is None:
            return {}
        if type(raw) is not dict and not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping")
            return {}
        for key in raw:
            if key not in allowed:
                self.problem(f"{path}.{key}", f"unknown field (expected one of: {', '.join(sorted(allowed))})")
        return raw

    def string(self, raw: object, path: str) -> str | None:
        if raw is None:
            return None
        if not isinstance(raw, str) or not raw:
            self.problem(path, "must be a non-empty string")
            return None
        return raw

    def strings(self, raw: object, path: str) -> tuple[str, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.problem(path, "must be a list of strings")
            return ()
        items = [self.string(item, f"{path}[{i}]") for i, item in enumerate(raw)]
        for i, item in enumerate(raw):
            if item is None:
                self.problem(f"{path}[{i}]", "must be a non-empty string")
        return tuple(item for item in items if item is not None)

    def string_map(self, raw: object, path: str) -> tuple[tuple[str, str], ...]:
        if raw is None:
            return ()
        if type(raw) is not dict and not isinstance(raw, Mapping):
            self.problem(path, "must be a mapping of strings to strings")
            return ()
        pairs: list[tuple[str, str]] = []
        for key, value in raw.items():
            if not isinstance(value, str):
                self.problem(f"{path}.{key}", "value must be a string (quote numbers and booleans)")
            else:
                pairs.append((str(key), value))
        return tuple(pairs)

    def count(self, raw: object, path: str) -> int | None:
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            self.problem(path, "must be a whole number, 0 or more")
            return None
        return raw

    def fraction(self, raw: object, path: str) -> Fraction | None:
        """An exact amount: an integer or a string such as "2", "1.5" or "3/7" (never a YAML float)."""
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            self.problem(path, 'must be an integer or a quoted exact amount such as "1.5" or "3/7"')
            return None
        if isinstance(raw, str) and not AMOUNT.match(raw):
            self.problem(path, f'{raw!r} is not an exact amount (e.g. "2", "1.5", "3/7")')
            return None
        try:
            value = Fraction(raw)
        except (ValueError, ZeroDivisionError):
            self.problem(path, f'{raw!r} is not an exact amount (e.g. "2", "1.5", "3/7")')
            return None
        if value < 0:
            self.problem(path, "must not be negative")
            return None
        return value

    def boolean(self, raw: object, path: str, default: bool) -> bool:
        if raw is None:
            return default
        if not isinstance(raw, bool):
            self.problem(path, "must be true or false")
            return default
        return raw

    def choice(self, raw: object, path: str, kind: Callable[[str], T], default: T, names: str) -> T:
        if raw is None:
            return default
        try:
            return kind(raw)  # type: ignore[arg-type]
        except ValueError:
            self.problem(path, f"must be one of: {names}")
            return default

    def quantity(self, raw: object, path: str) -> str | None:
        """A Kubernetes quantity, checked and kept in its written form."""
        if raw is None:
            return None
        try:
            value = parse_quantity(raw)
        except (ValueError, TypeError, ArithmeticError):
            self.problem(path, f"{raw!r} is not a Kubernetes quantity (e.g. 1Gi, 512Mi)")
            return None
        if value <= 0:
            self.problem(path, "must be more than zero")
            return None
        return str(raw)
