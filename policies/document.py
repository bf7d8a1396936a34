"""Edits on a Pod's JSON document. Each writer converges: it changes nothing already in place."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, NamedTuple

JSON = Any


class Change(NamedTuple):
    """One edit and the policy that asked for it (a NamedTuple: made dozens of times a pod)."""

    path: str
    what: str
    policy: str

    def __str__(self) -> str:
        return CHANGE_FORMAT % self


CHANGE_FORMAT = "%s: %s (policy %s)"  # %-formatting a tuple: several texts a pod, rendered in C


class Draft:
    """A copy-on-write edit of a JSON document: only the objects on written paths are copied.

    The original is never modified, and every untouched subtree of the draft *is* the original's,
    so deriving the patch skips it by identity.
    """

    def __init__(self, original: dict[str, JSON]) -> None:
        self.original = original
        self.root: dict[str, JSON] = dict(original)
        self._owned: set[int] = {id(self.root)}
        self._containers: dict[tuple[bool, int], dict[str, JSON]] = {}

    def _own(self, value: JSON) -> JSON:
        self._owned.add(id(value))
        return value

    def child(self, parent: dict[str, JSON], key: str, empty: type = dict) -> JSON:
        """parent[key] ready for writing (parent must come from this draft); created when missing or null."""
        value = parent.get(key)
        if value is None:
            value = parent[key] = self._own(empty())
        elif id(value) not in self._owned:
            value = parent[key] = self._own(dict(value) if isinstance(value, dict) else list(value))
        return value

    def item(self, parent: list[JSON], index: int) -> JSON:
        value = parent[index]
        if id(value) not in self._owned:
            value = parent[index] = self._own(dict(value) if isinstance(value, dict) else list(value))
        return value

    def spec(self) -> dict[str, JSON]:
        spec: dict[str, JSON] = self.child(self.root, "spec")
        return spec

    def container(self, init: bool, index: int) -> dict[str, JSON]:
        """A container ready for writing; several writers edit the same few, so they are kept at hand."""
        container = self._containers.get((init, index))
        if container is None:
            containers = self.child(self.spec(), "initContainers" if init else "containers", list)
            container = self._containers[(init, index)] = self.item(containers, index)
        return container


def format_count(amount: Decimal | None) -> str:
    return str(int(amount or 0))
