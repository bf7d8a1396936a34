"""CEL pieces of the native runtime settings (policies.native.runtime_map): which policy's setting a
key takes, a container holding a GPU, a toleration the pod has, and JSON patch operations as the
maps the mutation turns into JSONPatch values."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import orjson

from policies.gpu.models import MIG_RESOURCE_PREFIX, WHOLE_GPU_RESOURCE
from policies.model.policy import GPUPolicy, RuntimeSpec, Toleration, TolerationIdentity
from policies.native.matching import cel_string
from policies.native.objects import held, nonzero

# A setting's key (a name, or a toleration as the webhook compares it) and value (a string, or a
# toleration).
Key = str | TolerationIdentity
Value = str | Toleration


@dataclass(frozen=True, slots=True)
class Winner:
    """A setting written where `condition` holds: its owner matches, and no owner before it that
    sets the same key does."""

    owner: int  # its index among the owners
    key: Key
    value: Value
    condition: str


Settings = Callable[[RuntimeSpec], Iterable[tuple[Key, Value]]]


def winners(owners: Sequence[GPUPolicy], settings: Settings) -> list[Winner]:
    """Each owner's settings (`settings` gives a runtime section's (key, value) pairs in its
    order) with the condition each is written under, in the webhook's merge order
    (policies.mutate.runtime.merge: the first matching policy that sets a key wins it)."""
    found = []
    setters: dict[Key, list[int]] = {}
    for index, policy in enumerate(owners):
        assert policy.runtime is not None  # owners have one
        for key, value in dict(settings(policy.runtime)).items():
            before = setters.setdefault(key, [])
            condition = " && ".join([f"variables.p{index}", *(f"!variables.p{h}" for h in before)])
            found.append(Winner(index, key, value, condition))
            before.append(index)
    return found


def json_text(text: str) -> str:
    """`text` inside a JSON string, as the webhook's record writes it (orjson)."""
    return orjson.dumps(text).decode()[1:-1]


def literal(value: object) -> str:
    """CEL for a JSON value known here (strings, integers and maps of them)."""
    if isinstance(value, dict):
        return cel_map({k: literal(v) for k, v in value.items()})
    return str(value) if isinstance(value, int) else cel_string(str(value))


def cel_map(entries: dict[str, str]) -> str:
    """CEL: a map of the CEL values `entries`, of any types, each made dyn: the API server's
    checker holds a literal's values to one type (its homogeneous aggregate literals)."""
    return "{" + ", ".join(f"{cel_string(k)}: dyn({v})" for k, v in entries.items()) + "}"


def add(path: str, value: str) -> str:
    """CEL: one JSON patch `add` as a map (the mutation makes each a JSONPatch); `path` CEL."""
    return cel_map({"op": "'add'", "path": path, "value": value})


def made(field: str, pointer: str, items: str, empty: str = "[]") -> str:
    """CEL: the patch making the field `field` (at `pointer`) empty, where the pod has none and
    there are `items` to go in it."""
    return f"(!has({field}) && size({items}) > 0 ? [{add(cel_string(pointer), empty)}] : [])"


def appended(field: str, pointer: str, items: str, value: str) -> str:
    """CEL: patches appending each of `items` (as `value` of `i`) to the list `field`."""
    return f"{made(field, pointer, items)} + {items}.map(i, {add(cel_string(pointer + '/-'), value)})"


def holds_gpu(c: str) -> str:
    """CEL: container `c` asks for a whole GPU or a MIG slice, an amount other than zero, limits
    winning over requests (a subset of what the engine counts as holding a GPU)."""
    named = f"(r == {cel_string(WHOLE_GPU_RESOURCE)} || r.startsWith({cel_string(MIG_RESOURCE_PREFIX)}))"
    return f"(size({held(c, named, nonzero('{}'))}) > 0)"


def tolerated(toleration: Toleration) -> str:
    """CEL: the pod has `toleration` (normalised) already, compared as the webhook compares."""
    key, operator, value, effect, seconds = toleration.identity()

    def same(name: str, wanted: str | None, default: str = "") -> str:
        return f"(has(t.{name}) ? t.{name} : {cel_string(default)}) == {cel_string(wanted or '')}"

    parts = [same("key", key), same("operator", operator, "Equal"), same("value", value), same("effect", effect)]
    timed = "has(t.tolerationSeconds)"
    parts.append(f"{timed} && t.tolerationSeconds == {seconds}" if seconds is not None else f"!{timed}")
    return f"(has(object.spec.tolerations) && object.spec.tolerations.exists(t, {' && '.join(parts)}))"


def joined(items: list[str]) -> str:
    """CEL: the lists `items` concatenated, as a balanced tree: a chain of + nests as deep as it
    is long, and CEL parsers cap nesting (the API server's at 250, the engine's at 32)."""
    if not items:
        return "[]"
    if len(items) == 1:
        return items[0]
    half = len(items) // 2
    return f"({joined(items[:half])}) +\n({joined(items[half:])})"
