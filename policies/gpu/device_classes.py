"""What a DRA DeviceClass (resource.k8s.io) selects, and which extended resources it serves
(KEP-5004).

A device must satisfy every selector of its class and of the request naming it. Each selector
is compiled once (policies.gpu.device_cel): evaluated over the devices the cluster's
ResourceSlices show, and where none shows a device, read for the terms its checked tree proves
(NVIDIA's driver, its `type`, its `profile`). What a class cannot be shown to rule out, it is
charged for.

Before the cluster has said which classes exist (offline, or a class not seen yet), NVIDIA's
classes are read as its driver's chart publishes them, and any other name as a class that may
select any GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from policies.errors import InputError
from policies.gpu.device_cel import (
    ANY_DEVICE,
    NVIDIA_DRIVER,
    DeviceSelector,
    Selection,
    SelectorError,
    compile_selector,
)
from policies.gpu.devices import DRA_EXTENDED_PREFIX
from policies.json_fields import json_list
from policies.memo import Memo

Selectors = tuple[DeviceSelector, ...]


def read_expression(expression: str) -> Selection:
    """What one CEL selector is proven to pin (SelectorError where it cannot compile)."""
    return compile_selector(expression).selection


def read_selectors(raw: object, path: str) -> tuple[Selectors, Selection]:
    """A list of DeviceSelectors (a class's `spec.selectors`, a request's `selectors`), compiled,
    and what they pin together; InputError names a selector that does not compile."""
    compiled: list[DeviceSelector] = []
    selection = ANY_DEVICE
    for i, selector in enumerate(json_list(raw, path)):
        if not isinstance(selector, Mapping):
            raise InputError(f"{path}[{i}]", "must be an object")
        cel = selector.get("cel")
        if cel is None:
            continue
        where = f"{path}[{i}].cel.expression"
        if not isinstance(cel, Mapping) or not isinstance(cel.get("expression"), str):
            raise InputError(where, "must be a string")
        try:
            found = compile_selector(str(cel["expression"]))
        except SelectorError as error:
            raise InputError(where, f"Invalid value: {error}") from None
        compiled.append(found)
        selection = selection.also(found.selection)
    return tuple(compiled), selection


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selection: Selection = ANY_DEVICE  # what its selectors are proven to pin
    extended_resource: str | None = None  # spec.extendedResourceName
    created: str = ""  # metadata.creationTimestamp (RFC 3339, so ordered as text): the later wins a name
    selectors: Selectors = ()  # compiled, for the devices ResourceSlices show


def read_device_class(raw: Mapping[str, object]) -> DeviceClass:
    """A DeviceClass object (resource.k8s.io v1, v1beta2 or v1beta1: the spec is the same)."""
    metadata = raw.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("metadata.name", "must be a non-empty string")
    spec = raw.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    extended = spec.get("extendedResourceName")
    created = metadata.get("creationTimestamp")
    selectors, selection = read_selectors(spec.get("selectors"), "spec.selectors")
    return DeviceClass(
        name,
        selection,
        extended if isinstance(extended, str) and extended else None,
        created if isinstance(created, str) else "",
        selectors,
    )


def _published(name: str, expression: str, extended: str | None = None) -> DeviceClass:
    selectors = (compile_selector(expression),)
    return DeviceClass(name, selectors[0].selection, extended, "", selectors)


def _nvidia(kind: str) -> str:
    return f"device.driver == '{NVIDIA_DRIVER}' && device.attributes['{NVIDIA_DRIVER}'].type == '{kind}'"


# NVIDIA's classes as its DRA driver's chart publishes them (gpu.nvidia.com maps nvidia.com/gpu
# from resource.k8s.io/v1 on), and its compute-domain classes, which hand out IMEX channels.
_DOMAIN = "compute-domain.nvidia.com"
NVIDIA_CLASSES = (
    _published("gpu.nvidia.com", _nvidia("gpu"), "nvidia.com/gpu"),
    _published("mig.nvidia.com", _nvidia("mig")),
    _published("vfio.gpu.nvidia.com", _nvidia("vfio")),
    _published("compute-domain-daemon.nvidia.com", f"device.driver == '{_DOMAIN}'"),
    _published("compute-domain-default-channel.nvidia.com", f"device.driver == '{_DOMAIN}'"),
)


@dataclass(frozen=True, slots=True)
class DeviceClasses:
    """The cluster's DeviceClasses; `known`: every class is here (a live replica's watch), so a
    name not here does not exist yet."""

    classes: Mapping[str, DeviceClass]
    known: bool = False
    # What each request resolves to under these classes (policies.gpu.claims.resolve): a claim is
    # read once, judged on every pod that names it.
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)

    @classmethod
    def of(cls, classes: Iterable[DeviceClass], known: bool = True) -> DeviceClasses:
        return cls({c.name: c for c in classes}, known)

    def selection(self, name: str) -> Selection:
        """What a class is proven to select: a class not (yet) in the cluster may be made to
        select any GPU, so it narrows nothing."""
        found = self.classes.get(name)
        return found.selection if found is not None else ANY_DEVICE

    def selectors(self, name: str) -> Selectors | None:
        """A class's compiled selectors; None for a class not (yet) in the cluster."""
        found = self.classes.get(name)
        return found.selectors if found is not None else None

    @property
    def nvidia_names(self) -> frozenset[str]:
        """NVIDIA's own names (`nvidia.com/...`) a class serves."""
        return self.memo.get(
            "nvidia_names",
            lambda: frozenset(
                c.extended_resource
                for c in self.classes.values()
                if c.extended_resource is not None and c.extended_resource.startswith("nvidia.com/")
            ),
        )

    def serving(self, resource: str) -> DeviceClass | None:
        """The class that serves an extended resource, as the scheduler picks it: by the implicit
        name, else the class that names it, the one made last where several do."""
        if resource.startswith(DRA_EXTENDED_PREFIX):
            return self.classes.get(resource[len(DRA_EXTENDED_PREFIX) :])
        return self.memo.get(("serving", resource), lambda: self._named(resource))

    def _named(self, resource: str) -> DeviceClass | None:
        named = [c for c in self.classes.values() if c.extended_resource == resource]
        return max(named, key=lambda c: (c.created, c.name)) if named else None

    def collisions(self) -> list[tuple[str, tuple[str, ...]]]:
        """Extended resource names that several classes claim, with those classes (the later wins)."""
        by_name: dict[str, list[str]] = {}
        for device_class in self.classes.values():
            if device_class.extended_resource:
                by_name.setdefault(device_class.extended_resource, []).append(device_class.name)
        return sorted((name, tuple(sorted(names))) for name, names in by_name.items() if len(names) > 1)


DEFAULT_CLASSES = DeviceClasses.of(NVIDIA_CLASSES, known=False)
