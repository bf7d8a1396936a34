"""DRA device selectors as the scheduler evaluates them: CEL over one device at a time, in the
environment Kubernetes gives them (k8s.io/dynamic-resource-allocation/cel, compile.go).

The variable is `device`: `driver`, `allowMultipleAllocations`, `attributes[domain][name]` (a
string, int, bool or version, or a list of them; a name without a domain takes the driver's) and
`capacity[domain][name]` (a quantity), with Kubernetes' CEL libraries, the strings and optional
extensions and `cel.bind`. Quantities are carried by value and versions in canonical form
(policies.cel.library), so equality and ordering agree with Kubernetes'.

What a selector admits is read two ways:
- **evaluated** (`admits`) over a device the cluster's ResourceSlices show, as the scheduler
  evaluates it; where evaluation fails (a missing attribute, a type Kubernetes would refuse) the
  device counts as admitted: the scheduler cannot allocate past an error, so counting it is more,
  never less;
- **proven** (`DeviceSelector.selection`) where no slice shows a device: the terms of the
  selector's top-level conjunction that pin NVIDIA's driver, its `type` or its `profile` by
  equality, read off the compiler's checked tree (policies.cel.checked), never off the text. Any
  other term narrows nothing.

A selector this host cannot compile because it lacks a library Kubernetes has (ip and cidr,
some list functions, two-variable macros) narrows nothing and is evaluated as admitting every
device; one that does not parse, or names what Kubernetes does not declare either, is refused
(`SelectorError`), as the API server refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext.ext_bindings import ExtBindings
from cel_expr_python.ext.ext_optional import ExtOptional
from cel_expr_python.ext.ext_strings import ExtStrings

from policies.cel.checked import CheckedError, Node, checked_tree
from policies.cel.library import BY_VALUE, by_value, functions
from policies.cel.semver import SemverError, parse
from policies.quantity import parse_quantity

NVIDIA_DRIVER = "gpu.nvidia.com"
_ENV = cel.NewEnv(
    variables={"device": cel.Type.DYN},
    extensions=[ExtStrings(), ExtOptional(), ExtBindings()],
    functions=functions(BY_VALUE),
)
# Names Kubernetes' CEL declares that this host does not (k8s.io/apiserver/pkg/cel/library and
# cel-go's ext.Lists and two-variable comprehensions): a selector naming one is unreadable here,
# not invalid.
KUBERNETES_ONLY = frozenset(
    {
        *("ip", "isIP", "cidr", "isCIDR", "family", "isUnspecified", "isLoopback", "isGlobalUnicast"),
        *("isLinkLocalMulticast", "isLinkLocalUnicast", "containsIP", "containsCIDR", "masked", "prefixLength"),
        *("sort", "sortBy", "flatten", "slice", "distinct", "lists", "includes", "indexOf", "lastIndexOf"),
        *("transformList", "transformMap", "transformMapEntry", "existsOne", "reverse", "first", "last"),
    }
)
_TWO_VARIABLE_MACRO = re.compile(
    r"\.\s*(all|exists|existsOne|exists_one|transformList|transformMap\w*)\s*\(\s*\w+\s*,\s*\w+\s*,"
)
_UNDECLARED = re.compile(r"undeclared reference to '([^']*)'|found no matching overload for '([^']*)'")


class SelectorError(ValueError):
    """The selector does not compile where Kubernetes' CEL would not either: CEL's own message."""


@dataclass(frozen=True, slots=True)
class Selection:
    """What selectors are proven to pin of a device; None where they leave it open."""

    driver: str | None = None
    type: str | None = None  # the driver's `type` attribute: gpu, mig, vfio
    profile: str | None = None
    contradicts: bool = False  # two terms pin one field to different values: nothing matches

    def also(self, other: Selection) -> Selection:
        """Both selections at once (a device must pass the class's selectors and the request's)."""
        if other is ANY_DEVICE:
            return self
        if self is ANY_DEVICE:
            return other
        driver, kind, profile = self.driver, self.type, self.profile
        contradicts = (
            self.contradicts
            or other.contradicts
            or (driver is not None and other.driver is not None and driver != other.driver)
            or (kind is not None and other.type is not None and kind != other.type)
            or (profile is not None and other.profile is not None and profile != other.profile)
        )
        return Selection(
            driver if driver is not None else other.driver,
            kind if kind is not None else other.type,
            profile if profile is not None else other.profile,
            contradicts,
        )

    @property
    def reaches_gpu(self) -> bool:
        """Whether a device so selected may be one of NVIDIA's GPUs or MIG devices: only a driver
        other than NVIDIA's GPU driver rules one out (any `type` of that driver's may be a GPU)."""
        return not self.contradicts and self.driver in (None, NVIDIA_DRIVER)


ANY_DEVICE = Selection()


@dataclass(frozen=True, slots=True)
class DeviceSelector:
    """One CEL selector, compiled once per text; `program` None where this host cannot evaluate it."""

    source: str
    program: Any = field(compare=False)
    selection: Selection = field(default=ANY_DEVICE, compare=False)  # what it is proven to pin (policies.cel.checked)


def _nvidia_attribute(node: Node) -> str | None:
    """`device.attributes['gpu.nvidia.com'].<name>` (or `[...]['<name>']`): the attribute's name."""
    if node.kind == "select" and not node.test_only and node.args:
        inner, name = node.args[0], node.name
    elif node.kind == "call" and node.name == "_[_]" and len(node.args) == 2 and isinstance(node.args[1].value, str):
        inner, name = node.args[0], node.args[1].value
    else:
        return None
    domain = inner.args if inner.kind == "call" and inner.name == "_[_]" and len(inner.args) == 2 else ()
    if not domain or domain[1].kind != "const" or domain[1].value != NVIDIA_DRIVER:
        return None
    root = domain[0]
    if root.kind == "select" and root.name == "attributes" and not root.test_only and _is_device(root.args):
        return name
    return None


def _is_device(args: tuple[Node, ...]) -> bool:
    return len(args) == 1 and args[0].kind == "ident" and args[0].name == "device"


def _pinned(node: Node) -> tuple[str, str] | None:
    """(field, value) where `node` is `<field> == '<value>'` on the driver, type or profile."""
    if node.kind != "call" or len(node.args) != 2:
        return None
    if node.name == "_==_":
        sides = [node.args, node.args[::-1]]
    elif node.name == "@in" and node.args[1].kind == "list" and len(node.args[1].args) == 1:
        sides = [(node.args[0], node.args[1].args[0])]
    else:
        return None
    for path, literal in sides:
        if literal.kind != "const" or not isinstance(literal.value, str):
            continue
        if path.kind == "select" and path.name == "driver" and not path.test_only and _is_device(path.args):
            return "driver", literal.value
        name = _nvidia_attribute(path)
        if name in ("type", "profile"):
            return name, literal.value
    return None


def _conjuncts(node: Node) -> list[Node]:
    if node.kind == "call" and node.name == "_&&_":
        return [c for arg in node.args for c in _conjuncts(arg)]
    return [node]


def proven(tree: Node) -> Selection:
    """What a selector's checked tree pins by the equalities of its top-level conjunction."""
    selection = ANY_DEVICE
    for term in _conjuncts(tree):
        found = _pinned(term)
        if found is None or any(ord(c) < 32 or ord(c) == 127 for c in found[1]):
            continue  # a literal with a control character narrows nothing: none reaches a message
        name, value = found
        if name == "driver":
            selection = selection.also(Selection(driver=value))
        elif name == "type":
            selection = selection.also(Selection(type=value))
        else:
            selection = selection.also(Selection(profile=value))
    return selection


def _unreadable_here(message: str, source: str) -> bool:
    """Whether a compile error is this host's gap rather than the selector's fault."""
    if "`" in source or _TWO_VARIABLE_MACRO.search(source):
        return True  # quoted identifiers and two-variable macros: Kubernetes' CEL parses them
    return any((found.group(1) or found.group(2)) in KUBERNETES_ONLY for found in _UNDECLARED.finditer(message))


@lru_cache(maxsize=4096)
def compile_selector(source: str) -> DeviceSelector:
    """A selector compiled once per text; SelectorError where Kubernetes would refuse it too."""
    try:
        program = _ENV.compile(source)
    except RuntimeError as error:
        message = str(error).removeprefix("INVALID_ARGUMENT: ")
        if _unreadable_here(message, source):
            return DeviceSelector(source, None, ANY_DEVICE)
        first = message.splitlines()[0] if message else "invalid expression"
        raise SelectorError(f"compilation failed: {first}") from None
    try:
        selection = proven(checked_tree(program.serialize()))
    except CheckedError:
        selection = ANY_DEVICE
    return DeviceSelector(source, program, selection)


# -- devices, as a selector sees them ----------------------------------------------------------------


class Unconvertible(ValueError):
    """A device value Kubernetes cannot hand to CEL (a malformed version): every selector errs on it."""


def _attribute(raw: object) -> object:
    if not isinstance(raw, Mapping):
        raise Unconvertible("attribute")
    for key in ("int", "bool", "string"):
        if key in raw:
            return raw[key]
    if "version" in raw:
        return _version(raw["version"])
    for key in ("ints", "bools", "strings"):
        if isinstance(raw.get(key), list):
            return list(raw[key])
    if isinstance(raw.get("versions"), list):
        return [_version(v) for v in raw["versions"]]
    raise Unconvertible("attribute")


def _version(raw: object) -> str:
    try:
        return parse(str(raw)).canonical
    except SemverError:
        raise Unconvertible("version") from None


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, slash, rest = name.partition("/")
    return (domain, rest) if slash else (driver, name)


def device_input(driver: str, raw: Mapping[str, Any]) -> dict[str, object] | None:
    """The `device` a selector sees of a ResourceSlice's device; None where Kubernetes could not
    convert it (every selector then fails on it)."""
    attributes: dict[str, dict[str, object]] = {}
    capacity: dict[str, dict[str, object]] = {}
    try:
        for name, value in (raw.get("attributes") or {}).items():
            domain, key = _split(str(name), driver)
            attributes.setdefault(domain, {})[key] = _attribute(value)
        for name, value in (raw.get("capacity") or {}).items():
            domain, key = _split(str(name), driver)
            amount = value.get("value") if isinstance(value, Mapping) else None
            capacity.setdefault(domain, {})[key] = by_value(Decimal(parse_quantity(amount)))
    except (Unconvertible, ValueError, TypeError, ArithmeticError, AttributeError):
        return None
    return {
        "driver": driver,
        "allowMultipleAllocations": raw.get("allowMultipleAllocations") is True,
        "attributes": attributes,
        "capacity": capacity,
    }


def admits(selector: DeviceSelector, device: Mapping[str, object] | None) -> bool:
    """Whether the scheduler may count `device` (a `device_input`) as matching the selector: true,
    or an error (which stops the allocation there, so counting it is more, never less). The
    device is converted for each evaluation: an activation made on one thread cannot run the
    library's Python functions on another (cel-expr-python keeps their arena per thread), and
    the watches read slices on threads of their own."""
    if selector.program is None or device is None:
        return True
    value = selector.program.eval(data={"device": device})
    if value.type() == cel.Type.ERROR:
        return True
    return value.plain_value() is not False
