"""Edits on a Pod's JSON document. Each writer converges: it changes nothing already in place."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

JSON = Any


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    what: str
    policy: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what} (policy {self.policy})"


def clone(value: JSON) -> JSON:
    """A deep copy of plain JSON, several times faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def child(parent: dict[str, JSON], key: str, empty: type = dict) -> JSON:
    """parent[key], created empty when missing or null."""
    value = parent.get(key)
    if value is None:
        value = parent[key] = empty()
    return value


def container_at(doc: dict[str, JSON], init: bool, index: int) -> dict[str, JSON]:
    containers: list[dict[str, JSON]] = doc["spec"]["initContainers" if init else "containers"]
    return containers[index]


def format_count(amount: Decimal | None) -> str:
    return str(int(amount or 0))
