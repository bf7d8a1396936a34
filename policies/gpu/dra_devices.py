"""The devices of NVIDIA's DRA driver (`gpu.nvidia.com`) as its ResourceSlices publish them: every
device, whatever its model (a GPU the MIG catalog does not know, an L40S, a T4, is a device like
any other), with what charging needs of it (`DeviceKind`), where it is, what it consumes of a
partitionable pool's counters, its taints, and the `device` its selectors see
(policies.gpu.device_cel).

A device's kind is read from the driver's attributes: `type` (gpu, mig, vfio), `productName`
(the catalog's model where it knows the product; GFD's product label is the same name with
dashes), `profile` for MIG devices; and its capacities where it allows multiple allocations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.gpu.catalog import Catalog
from policies.gpu.device_cel import NVIDIA_DRIVER, device_input
from policies.gpu.device_shares import SharedCapacity, read_capacities
from policies.quantity import parse_quantity

DeviceKey = tuple[str, str, str]  # (driver, pool, device), as an allocation result names it
Counter = tuple[str, str]  # (counter set, counter)
Taint = tuple[str, str, str]  # (key, value, effect)
BLOCKING = frozenset({"NoSchedule", "NoExecute"})  # the effects that keep the scheduler off a device


@dataclass(frozen=True, slots=True)
class DeviceKind:
    """What charging needs of a device: a whole GPU (`gpu`, `vfio`, or a type the catalog cannot
    weigh) weighs one GPU-equivalent; a MIG device its profile's weight on its model (a whole
    GPU's worth where the catalog does not know the two). `model` None: a product the catalog
    does not know, or a device no slice shows (what selectors prove of it)."""

    type: str
    model: str | None = None
    profile: str | None = None
    shares: tuple[SharedCapacity, ...] | None = None  # None: it does not allow multiple allocations
    product: str = ""  # productName, as the driver publishes it

    @property
    def mig(self) -> bool:
        return self.type == "mig"


WHOLE_GPU = DeviceKind("gpu")  # a device no slice shows, that may be any GPU
ANY_MIG = DeviceKind("mig")  # a MIG device of any profile no slice shows: a whole GPU's worth


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One device of NVIDIA's driver a ResourceSlice offers: made once per device as the view loads it."""

    key: DeviceKey
    kind: DeviceKind
    node: str | None  # None: reachable from several nodes (a slice for all nodes, or a node selector)
    consumes: tuple[tuple[Counter, int], ...] = ()
    memory_mib: int | None = None
    taints: tuple[Taint, ...] = ()
    cel: Any = field(default=None, compare=False, repr=False)  # the `device` its selectors see

    @property
    def model(self) -> str | None:
        return self.kind.model

    @property
    def profile(self) -> str | None:
        return self.kind.profile if self.kind.mig else None


@dataclass(frozen=True, slots=True)
class SliceContent:
    """What one ResourceSlice holds of NVIDIA's GPUs: its pool, generation, devices and counters."""

    pool: tuple[str, str]  # (driver, pool name)
    generation: int
    devices: tuple[DraDevice, ...]
    counters: tuple[tuple[Counter, int], ...]
    node: str | None = None


def _amount(raw: object) -> int | None:
    value = raw.get("value") if isinstance(raw, Mapping) else None
    if not isinstance(value, (str, int)):
        return None
    try:
        return int(parse_quantity(value))
    except (ValueError, TypeError, ArithmeticError):
        return None


def counters_of(raw: object, set_key: str) -> list[tuple[Counter, int]]:
    """A list of counter sets ({name | counterSet, counters: {name: {value}}}) as (set, counter) amounts."""
    found: list[tuple[Counter, int]] = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get(set_key), str):
            continue
        counters = entry.get("counters")
        for name, amount in counters.items() if isinstance(counters, Mapping) else ():
            value = _amount(amount)
            if value is not None:
                found.append(((str(entry[set_key]), str(name)), value))
    return found


def _string(attributes: Mapping[str, Any], name: str) -> str | None:
    for key in (name, f"{NVIDIA_DRIVER}/{name}"):
        found = attributes.get(key)
        if isinstance(found, Mapping) and isinstance(found.get("string"), str):
            return str(found["string"])
    return None


def taints_of(raw: object) -> tuple[Taint, ...]:
    """The taints of a device (or a DeviceTaintRule's one) that keep the scheduler off it."""
    found = []
    for taint in raw if isinstance(raw, list) else ():
        if isinstance(taint, Mapping) and taint.get("effect") in BLOCKING and isinstance(taint.get("key"), str):
            found.append((str(taint["key"]), str(taint.get("value") or ""), str(taint["effect"])))
    return tuple(found)


def device_kind(attributes: Mapping[str, Any], capacity: object, shareable: bool, catalog: Catalog) -> DeviceKind:
    kind = _string(attributes, "type") or "unknown"
    product = _string(attributes, "productName") or ""
    found = catalog.from_product_label(product.replace(" ", "-")) if product else None
    model = found[0] if found is not None else None
    profile = _string(attributes, "profile") if kind == "mig" else None
    if model is not None and profile is not None and model.profile(profile) is None:
        model = None  # a slice the catalog cannot weigh on this model: weighed as a whole GPU's worth
    shares = read_capacities(capacity, NVIDIA_DRIVER) if shareable else None
    return DeviceKind(kind, model.key if model is not None else None, profile, shares, product)


def _device(raw: object, pool: str, node: str | None, catalog: Catalog) -> DraDevice | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        return None
    attributes = raw.get("attributes")
    attributes = attributes if isinstance(attributes, Mapping) else {}
    capacity = raw.get("capacity")
    memory = _amount(capacity.get("memory")) if isinstance(capacity, Mapping) else None
    if raw.get("allNodes") is True or raw.get("nodeSelector") is not None:
        node = None
    elif isinstance(raw.get("nodeName"), str):
        node = str(raw["nodeName"])
    return DraDevice(
        (NVIDIA_DRIVER, pool, str(raw["name"])),
        device_kind(attributes, capacity, raw.get("allowMultipleAllocations") is True, catalog),
        node,
        tuple(counters_of(raw.get("consumesCounters"), "counterSet")),
        memory // 2**20 if memory is not None else None,
        taints_of(raw.get("taints")),
        device_input(NVIDIA_DRIVER, raw),
    )


def read_slice(raw: Mapping[str, Any], catalog: Catalog) -> SliceContent | None:
    """A ResourceSlice (resource.k8s.io/v1) of NVIDIA's GPU driver; None for any other driver's."""
    spec = raw.get("spec")
    if not isinstance(spec, Mapping) or spec.get("driver") != NVIDIA_DRIVER:
        return None
    pool = spec.get("pool")
    pool = pool if isinstance(pool, Mapping) else {}
    name = str(pool.get("name", ""))
    generation = pool.get("generation")
    node = spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None
    devices = spec.get("devices")
    found = [_device(d, name, node, catalog) for d in (devices if isinstance(devices, list) else ())]
    return SliceContent(
        (NVIDIA_DRIVER, name),
        generation if type(generation) is int else 0,
        tuple(d for d in found if d is not None),
        tuple(counters_of(spec.get("sharedCounters"), "name")),
        node,
    )
