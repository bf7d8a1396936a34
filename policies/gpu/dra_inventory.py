"""Free GPU capacity from DRA: the devices NVIDIA's driver publishes in ResourceSlices, minus what
claims' allocations hold. On a DRA-only cluster (no GPU Feature Discovery label anywhere) this is
all the capacity there is; on a mixed one it adds to what node labels say (`WithDra`).

A device counts as its attributes say: `productName` names the model (GFD's product label is the
same name with dashes for spaces), `type` is `gpu` or `mig`, `profile` the MIG profile. In a
partitionable pool (Kubernetes 1.36 on: `sharedCounters`, devices that `consumesCounters`), a
device is free only while what it consumes still fits beside what the allocated devices consume:
a whole GPU with one slice carved from it is not offered, nor is a placement that overlaps one in
use. Only slices of a pool's newest generation count (a driver replaces a pool by publishing a
newer one). The count of a profile is how many of it fit at once beside what is allocated (each
placement counted takes its counters before the next is tried; dynamic MIG advertises every
placement, and overlapping ones are not offered twice).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from policies.gpu.capacity import Capacity
from policies.gpu.catalog import Catalog
from policies.gpu.device_classes import NVIDIA_DRIVER, DeviceClasses, Selection
from policies.gpu.device_shares import CapacityAsk, SharedCapacity, read_capacities, share_of
from policies.gpu.models import MIG_RESOURCE_PREFIX, WHOLE_GPU_RESOURCE
from policies.quantity import parse_quantity

DeviceKey = tuple[str, str, str]  # (driver, pool, device), as an allocation result names it
Counter = tuple[str, str]  # (counter set, counter)


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One NVIDIA device a ResourceSlice offers: made once per device as the cluster view loads it."""

    key: DeviceKey
    model: str  # the catalog's model key
    profile: str | None  # None: a whole GPU
    consumes: tuple[tuple[Counter, int], ...]
    memory_mib: int | None
    shares: tuple[SharedCapacity, ...] | None = None  # None: it does not allow multiple allocations


@dataclass(frozen=True, slots=True)
class SliceContent:
    """What one ResourceSlice holds of NVIDIA's GPUs: its pool, generation, devices and counters."""

    pool: tuple[str, str]  # (driver, pool name)
    generation: int
    devices: tuple[DraDevice, ...]
    counters: tuple[tuple[Counter, int], ...]


def _amount(raw: object) -> int | None:
    value = raw.get("value") if isinstance(raw, Mapping) else None
    if not isinstance(value, (str, int)):
        return None
    try:
        return int(parse_quantity(value))
    except (ValueError, TypeError, ArithmeticError):
        return None


def _counters(raw: object, set_key: str) -> list[tuple[Counter, int]]:
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


def _device(raw: object, driver: str, pool: str, catalog: Catalog) -> DraDevice | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        return None
    attributes = raw.get("attributes")
    attributes = attributes if isinstance(attributes, Mapping) else {}
    kind, product = _string(attributes, "type"), _string(attributes, "productName")
    if kind not in ("gpu", "mig") or product is None:
        return None
    found = catalog.from_product_label(product.replace(" ", "-"))
    if found is None:
        return None
    model = found[0]
    profile = _string(attributes, "profile") if kind == "mig" else None
    if kind == "mig" and (profile is None or model.profile(profile) is None):
        return None  # a slice this catalog cannot weigh is not offered
    capacity = raw.get("capacity")
    memory = _amount(capacity.get("memory")) if isinstance(capacity, Mapping) else None
    return DraDevice(
        (driver, pool, str(raw["name"])),
        model.key,
        profile,
        tuple(_counters(raw.get("consumesCounters"), "counterSet")),
        memory // 2**20 if memory is not None else None,
        read_capacities(capacity, driver) if raw.get("allowMultipleAllocations") is True else None,
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
    devices = spec.get("devices")
    found = [_device(d, NVIDIA_DRIVER, name, catalog) for d in (devices if isinstance(devices, list) else ())]
    return SliceContent(
        (NVIDIA_DRIVER, name),
        generation if type(generation) is int else 0,
        tuple(d for d in found if d is not None),
        tuple(_counters(spec.get("sharedCounters"), "name")),
    )


def allocated_devices(claim: Mapping[str, Any]) -> tuple[DeviceKey, ...]:
    """The devices a ResourceClaim's status says are allocated to it."""
    status = claim.get("status")
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results = devices.get("results") if isinstance(devices, Mapping) else None
    keys = []
    for result in results if isinstance(results, list) else ():
        if isinstance(result, Mapping) and all(isinstance(result.get(k), str) for k in ("driver", "pool", "device")):
            keys.append((str(result["driver"]), str(result["pool"]), str(result["device"])))
    return tuple(keys)


class DraInventory:
    """NVIDIA's devices by slice, and the devices claims hold: free placements per (model, profile)."""

    def __init__(self) -> None:
        self._slices: dict[str, SliceContent] = {}
        self._allocated: dict[object, tuple[DeviceKey, ...]] = {}  # claim -> devices
        self._free: dict[tuple[str, str | None], int] | None = None  # derived, dropped on change
        self._memory: dict[tuple[str, str], int] = {}
        self._offered: frozenset[str | None] = frozenset()  # profiles devices are of (None: whole GPUs)

    # -- changes ---------------------------------------------------------------------------
    def set_slice(self, name: str, content: SliceContent | None) -> None:
        if content is None:
            self._slices.pop(name, None)
        else:
            self._slices[name] = content
        self._free = None

    def replace_slices(self, slices: Mapping[str, SliceContent]) -> None:
        self._slices = dict(slices)
        self._free = None

    def set_allocation(self, claim: object, devices: tuple[DeviceKey, ...]) -> None:
        if devices:
            self._allocated[claim] = devices
        else:
            self._allocated.pop(claim, None)
        self._free = None

    def replace_allocations(self, allocations: Iterable[tuple[object, tuple[DeviceKey, ...]]]) -> None:
        self._allocated = {claim: devices for claim, devices in allocations if devices}
        self._free = None

    # -- what is free --------------------------------------------------------------------------
    @property
    def known(self) -> bool:
        return any(s.devices for s in self._slices.values())

    def has_model(self, model: str) -> bool:
        return any(d.model == model for s in self._slices.values() for d in s.devices)

    def offers(self, profile: str | None) -> bool:
        """Whether some device is a slice of `profile` (a whole GPU for None), free or not."""
        self._counted()
        return profile in self._offered

    def free(self, model: str, profile: str | None) -> int:
        return self._counted().get((model, profile), 0)

    def memory_mib(self, model: str, profile: str) -> int | None:
        self._counted()
        return self._memory.get((model, profile))

    def _counted(self) -> dict[tuple[str, str | None], int]:
        """What the slices and allocations say, worked out once per change (read on every review)."""
        if self._free is None:
            self._free, self._memory, self._offered = self._count()
        return self._free

    def device_share(self, selection: Selection, asked: CapacityAsk) -> Fraction | None:
        """The most one device of NVIDIA's that `selection` may get takes of it when asked `asked`
        (policies.gpu.device_shares); None (a whole device) where one may not be shared, or none
        is known."""
        if selection.driver != NVIDIA_DRIVER or selection.contradicts:
            return None
        most: Fraction | None = None
        for content in self._current():
            for device in content.devices:
                kind = "gpu" if device.profile is None else "mig"
                if selection.type not in (None, kind) or selection.profile not in (None, device.profile):
                    continue
                if device.shares is None:
                    return None
                share = share_of(device.shares, asked)
                most = share if most is None else max(most, share)
        return most

    def _current(self) -> list[SliceContent]:
        """The slices of each pool's newest generation (a driver replaces a pool by publishing a newer one)."""
        newest: dict[tuple[str, str], int] = {}
        for content in self._slices.values():
            newest[content.pool] = max(newest.get(content.pool, 0), content.generation)
        return [s for s in self._slices.values() if s.generation == newest[s.pool]]

    def _count(
        self,
    ) -> tuple[dict[tuple[str, str | None], int], dict[tuple[str, str], int], frozenset[str | None]]:
        current = self._current()
        totals: dict[tuple[tuple[str, str], Counter], int] = {}
        for content in current:
            for counter, amount in content.counters:
                totals[(content.pool, counter)] = amount
        taken = {key for devices in self._allocated.values() for key in devices}
        used: dict[tuple[tuple[str, str], Counter], int] = {}
        devices = [(s.pool, d) for s in current for d in s.devices]
        for pool, device in devices:
            if device.key in taken:
                for counter, amount in device.consumes:
                    used[(pool, counter)] = used.get((pool, counter), 0) + amount
        free: dict[tuple[str, str | None], int] = {}
        memory: dict[tuple[str, str], int] = {}
        placed: dict[tuple[str, str | None], dict[tuple[tuple[str, str], Counter], int]] = {}
        for pool, device in devices:
            key = (device.model, device.profile)
            if device.profile is not None and device.memory_mib is not None:
                profiled = (device.model, device.profile)  # typed as a profile's, not None
                memory[profiled] = min(memory.get(profiled, device.memory_mib), device.memory_mib)
            if device.key in taken:
                continue
            # How many of this profile fit at once: each placement counted consumes its counters
            # (in this profile's own tally) before the next is tried, so placements that overlap
            # one counted, or a whole GPU beside a slice, are not offered twice.
            tally = placed.setdefault(key, dict(used))
            fits = all(
                (pool, counter) not in totals or tally.get((pool, counter), 0) + amount <= totals[(pool, counter)]
                for counter, amount in device.consumes
            )
            if fits:
                for counter, amount in device.consumes:
                    tally[(pool, counter)] = tally.get((pool, counter), 0) + amount
                free[key] = free.get(key, 0) + 1
        return free, memory, frozenset(device.profile for _, device in devices)


def _slice_of(resource: str) -> tuple[str, str | None] | None:
    """The device a pod asking `resource` would get from DRA: a whole GPU or a profile's slice."""
    if resource == WHOLE_GPU_RESOURCE:
        return ("gpu", None)
    if resource.startswith(MIG_RESOURCE_PREFIX):
        return ("mig", resource[len(MIG_RESOURCE_PREFIX) :])
    return None


class Inventory(Protocol):
    """What WithDra reads of an inventory (DraInventory, or the edge's guarded copy)."""

    @property
    def known(self) -> bool: ...

    def has_model(self, model: str) -> bool: ...

    def offers(self, profile: str | None) -> bool: ...

    def free(self, model: str, profile: str | None) -> int: ...

    def memory_mib(self, model: str, profile: str) -> int | None: ...


class WithDra:
    """Capacity from node labels and the device plugin (`labels`), plus what DRA devices offer to
    a resource name a DeviceClass serves (`nvidia.com/gpu` served by NVIDIA's `gpu.nvidia.com`,
    a profile's `nvidia.com/mig-<profile>` by a class of that profile): a node with slices and no
    GFD label is a GPU node like any other."""

    def __init__(self, labels: Capacity, inventory: Inventory, classes: Callable[[], DeviceClasses]) -> None:
        self._labels = labels
        self._inventory = inventory
        self._classes = classes

    @property
    def known(self) -> bool:
        return self._labels.known or self._inventory.known

    def free(self, model: str, profile: str | None, resource: str) -> int:
        by_labels = self._labels.free(model, profile, resource)
        wanted = _slice_of(resource)
        if wanted is None or wanted[1] != profile or not self._inventory.known:
            return by_labels
        served = self._classes().serving(resource)
        if served is None or served.selection.also(Selection(NVIDIA_DRIVER, wanted[0], wanted[1])).contradicts:
            return by_labels
        return by_labels + self._inventory.free(model, profile)

    def memory_mib(self, model: str, profile: str) -> int | None:
        found = self._labels.memory_mib(model, profile)
        return found if found is not None else self._inventory.memory_mib(model, profile)

    def has_model(self, model: str) -> bool:
        return self._labels.has_model(model) or self._inventory.has_model(model)

    def plugin_serves(self, resource: str) -> bool:
        return self._labels.plugin_serves(resource)

    def dra_serves(self, resource: str) -> bool:
        wanted = _slice_of(resource)
        if wanted is None or not self._inventory.known:
            return False
        served = self._classes().serving(resource)
        if served is None or served.selection.also(Selection(NVIDIA_DRIVER, wanted[0], wanted[1])).contradicts:
            return False
        return self._inventory.offers(wanted[1])

    @property
    def dra_known(self) -> bool:
        return self._inventory.known

    def dra_free(self, model: str, profile: str | None) -> int:
        return self._inventory.free(model, profile) if self._inventory.known else 0

    def dra_offers(self, profile: str | None) -> bool:
        return self._inventory.known and self._inventory.offers(profile)
