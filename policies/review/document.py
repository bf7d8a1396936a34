"""Edits on a Pod's JSON document. Each writer converges: it changes nothing already in place."""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Any

from jsonpointer import escape

from policies.errors import InputError

# Keys written are field and resource names from a small vocabulary: escape each once.
_escaped = lru_cache(maxsize=1024)(escape)

JSON = Any


class Change:
    """One edit and the policy that asked for it. Made dozens of times a pod: a plain class (the
    value-class rule, docs/architecture.md)."""

    __slots__ = ("path", "what", "policy")

    def __init__(self, path: str, what: str, policy: str) -> None:
        self.path = path
        self.what = what
        self.policy = policy

    def __str__(self) -> str:
        return f"{self.path}: {self.what} (policy {self.policy})"

    def __repr__(self) -> str:
        return f"Change({self.path!r}, {self.what!r}, {self.policy!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Change):
            return NotImplemented
        return (self.path, self.what, self.policy) == (other.path, other.what, other.policy)

    def __hash__(self) -> int:
        return hash((self.path, self.what, self.policy))

    def under(self, prefix: str) -> Change:
        """The same change, its path inside a pod template at `prefix`."""
        return Change(f"{prefix}.{self.path}", self.what, self.policy)


def change_texts(changes: list[Change]) -> list[str]:
    """str() of each change, as one f-string each (dozens a pod)."""
    return [f"{c.path}: {c.what} (policy {c.policy})" for c in changes]


def _field(pointer: str | None, key: str) -> str:
    """The field path (`spec.affinity.nodeAffinity`) of `key` under the container at `pointer`."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in (pointer or "").split("/")[1:]]
    return ".".join([*parts, key])


class Draft:
    """A copy-on-write edit of a JSON document that records its RFC 6902 patch as it goes.

    The original is never modified: only the objects on written paths are copied. Writers change
    the draft through `set`, `remove` and `append`, each of which notes its operation, so the
    patch needs no diff of the two documents (a walk that cost a fifth of a mutation). Inside a
    container the draft added itself, writes need no operation: the `add` carries the container,
    filled by the time the patch is serialized.
    """

    def __init__(self, original: dict[str, JSON]) -> None:
        self.root: dict[str, JSON] = dict(original)
        self.operations: list[dict[str, JSON]] = []
        # id of each container copied or created here -> its JSON pointer; None inside an added one
        self._owned: dict[int, str | None] = {id(self.root): ""}
        self._containers: dict[tuple[bool, int], dict[str, JSON]] = {}
        self._removed: list[JSON] = []

    def child(self, parent: dict[str, JSON], key: str, empty: type = dict) -> JSON:
        """parent[key] ready for writing (parent must come from this draft); created when missing or null."""
        value = parent.get(key)
        if value is None:
            value = empty()
            self.set(parent, key, value)
        elif id(value) not in self._owned:
            where = self._owned[id(parent)]
            if isinstance(value, dict) and empty is dict:
                value = parent[key] = dict(value)
            elif isinstance(value, list) and empty is list:
                value = parent[key] = list(value)
            else:  # the requester's `spec.affinity: 1.5`: refused with its field, never a crash
                raise InputError(_field(where, key), "must be an object" if empty is dict else "must be a list")
            self._owned[id(value)] = None if where is None else f"{where}/{_escaped(key)}"
        return value

    def item(self, parent: list[JSON], index: int) -> JSON:
        value = parent[index]
        if id(value) not in self._owned:
            where = self._owned[id(parent)]
            if not isinstance(value, dict | list):
                raise InputError(_field(where, str(index)), "must be an object or a list")
            value = parent[index] = dict(value) if isinstance(value, dict) else list(value)
            self._owned[id(value)] = None if where is None else f"{where}/{index}"
        return value

    # A container written whole (by set or append) is the draft's own: later writes into it go in
    # place, carried by the operation that added it, instead of copying it and recording their own.

    def set(self, parent: dict[str, JSON], key: str, value: JSON) -> None:
        where = self._owned[id(parent)]
        if where is not None:
            op = "replace" if parent.get(key) is not None else "add"
            self.operations.append({"op": op, "path": f"{where}/{_escaped(key)}", "value": value})
        if isinstance(value, (dict, list)):
            self._owned[id(value)] = None
        parent[key] = value

    def remove(self, parent: dict[str, JSON], key: str) -> None:
        if key not in parent:
            return
        where = self._owned[id(parent)]
        if where is not None:
            self.operations.append({"op": "remove", "path": f"{where}/{_escaped(key)}"})
        # Kept alive: ids in _owned must not be reused by new objects while the draft lives.
        self._removed.append(parent.pop(key))

    def append(self, parent: list[JSON], value: JSON) -> None:
        where = self._owned[id(parent)]
        if where is not None:
            self.operations.append({"op": "add", "path": f"{where}/{len(parent)}", "value": value})
        if isinstance(value, (dict, list)):
            self._owned[id(value)] = None
        parent.append(value)

    def extend(self, parent: list[JSON], values: list[JSON]) -> None:
        """`append` of each of `values`, in order."""
        if self._owned[id(parent)] is None:  # inside a container the draft added: carried by its add
            # Not marked as the draft's own: a writer reaching into one would copy it, still in place.
            parent.extend(values)
            return
        for value in values:
            self.append(parent, value)

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
