"""What a DRA DeviceClass (resource.k8s.io) can select of NVIDIA's GPUs, read from its CEL
selectors, and which extended resources it serves (KEP-5004).

A device must satisfy every selector of its class and of the request naming it, so each
selector is read as a conjunction (`a && b && c`) of terms; the terms understood are NVIDIA's
DRA driver's own spellings (kubernetes-sigs/dra-driver-nvidia-gpu):
- `device.driver == '<driver>'`: a driver other than NVIDIA's GPU driver rules GPUs out;
- `device.attributes['gpu.nvidia.com'].type == 'gpu' | 'mig' | 'vfio'`;
- `device.attributes['gpu.nvidia.com'].profile == '<profile>'`: one MIG profile.
Any other term may hold for any device, so it narrows nothing: what a class cannot be shown to
rule out, it is charged for (a whole GPU a device, the most a MIG device is). A selector with
`||` or `!` is read as narrowing nothing for the same reason.

Before the cluster has said which classes exist (offline, or a class not seen yet), NVIDIA's
classes are read as its driver's chart publishes them, and any other name as a class that may
select any GPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from policies.errors import InputError
from policies.gpu.devices import DRA_EXTENDED_PREFIX
from policies.json_fields import json_list
from policies.memo import Memo

NVIDIA_DRIVER = "gpu.nvidia.com"
_ATTRIBUTE = r"""device\.attributes\[\s*['"]gpu\.nvidia\.com['"]\s*\]\.(type|profile)"""
_DRIVER = r"device\.driver"
# A literal with a control character in it is not read (so narrows nothing): none reaches a message.
_LITERAL = r"""['"]([^'"\x00-\x1f\x7f]*)['"]"""
_TERM = re.compile(rf"^\(?\s*({_ATTRIBUTE}|{_DRIVER})\s*==\s*{_LITERAL}\s*\)?$")
_SPLIT = re.compile(r"&&")


@dataclass(frozen=True, slots=True)
class Selection:
    """What selectors pin of a device; None where they leave it open."""

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
        """Whether a device so selected may be one of NVIDIA's GPUs or MIG devices."""
        if self.contradicts or self.driver not in (None, NVIDIA_DRIVER):
            return False
        return self.type in (None, "gpu", "mig", "vfio")


ANY_DEVICE = Selection()


def _term(text: str) -> Selection:
    found = _TERM.match(text.strip())
    if found is None:
        return ANY_DEVICE
    field, value = found.group(2), found.group(3)
    if field == "type":
        return Selection(type=value)
    if field == "profile":
        return Selection(profile=value)
    return Selection(driver=value)


def read_expression(expression: str) -> Selection:
    """What one CEL selector pins, read as a conjunction of terms."""
    if "||" in expression or "!" in expression.replace("!=", ""):
        return ANY_DEVICE
    selection = ANY_DEVICE
    for term in _SPLIT.split(expression):
        selection = selection.also(_term(term))
    return selection


def read_selectors(raw: object, path: str) -> Selection:
    """What a list of DeviceSelectors (a class's `spec.selectors`, a request's `selectors`) pins."""
    selection = ANY_DEVICE
    for i, selector in enumerate(json_list(raw, path)):
        if not isinstance(selector, Mapping):
            raise InputError(f"{path}[{i}]", "must be an object")
        cel = selector.get("cel")
        if cel is None:
            continue
        if not isinstance(cel, Mapping) or not isinstance(cel.get("expression"), str):
            raise InputError(f"{path}[{i}].cel.expression", "must be a string")
        selection = selection.also(read_expression(str(cel["expression"])))
    return selection


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selection: Selection = ANY_DEVICE
    extended_resource: str | None = None  # spec.extendedResourceName
    created: str = ""  # metadata.creationTimestamp (RFC 3339, so ordered as text): the later wins a name


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
    return DeviceClass(
        name,
        read_selectors(spec.get("selectors"), "spec.selectors"),
        extended if isinstance(extended, str) and extended else None,
        created if isinstance(created, str) else "",
    )


# NVIDIA's classes as its DRA driver's chart publishes them (gpu.nvidia.com maps nvidia.com/gpu
# from resource.k8s.io/v1 on), and its compute-domain classes, which hand out IMEX channels.
NVIDIA_CLASSES = (
    DeviceClass("gpu.nvidia.com", Selection(NVIDIA_DRIVER, "gpu"), "nvidia.com/gpu"),
    DeviceClass("mig.nvidia.com", Selection(NVIDIA_DRIVER, "mig")),
    DeviceClass("vfio.gpu.nvidia.com", Selection(NVIDIA_DRIVER, "vfio")),
    DeviceClass("compute-domain-daemon.nvidia.com", Selection("compute-domain.nvidia.com")),
    DeviceClass("compute-domain-default-channel.nvidia.com", Selection("compute-domain.nvidia.com")),
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
        """What a class can select: a class not (yet) in the cluster may be made to select any
        GPU, so it narrows nothing."""
        found = self.classes.get(name)
        return found.selection if found is not None else ANY_DEVICE

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
