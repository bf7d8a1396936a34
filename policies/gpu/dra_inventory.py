"""Free GPU capacity from DRA, and what a claim's requests can reach: the devices NVIDIA's driver
publishes in ResourceSlices (policies.gpu.dra_devices), minus what claims' allocations hold. On a
DRA-only cluster (no GPU Feature Discovery label anywhere) this is all the capacity there is; on a
mixed one it adds to what node labels say (`WithDra`), counting a node whose GPUs both the device
plugin and the DRA driver advertise once (by the device plugin's count).

A device is free only while no claim's allocation holds it, no taint with effect NoSchedule or
NoExecute (its own, or a DeviceTaintRule's) keeps the scheduler off it, and, in a partitionable
pool (Kubernetes 1.36 on: `sharedCounters`, devices that `consumesCounters`), what it consumes
still fits beside what the allocated devices consume: a whole GPU with one slice carved from it is
not offered, nor is a placement that overlaps one in use. Only slices of a pool's newest
generation count (a driver replaces a pool by publishing a newer one). The count of a profile is
how many of it fit at once beside what is allocated (each placement counted takes its counters
before the next is tried; dynamic MIG advertises every placement, and overlapping ones are not
offered twice).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from policies.gpu.capacity import LabelCapacity, NodeGpus
from policies.gpu.device_cel import DeviceSelector, admits
from policies.gpu.device_classes import DeviceClasses
from policies.gpu.device_reach import Reach, reach_of
from policies.gpu.dra_devices import Counter, DeviceKey, DraDevice, SliceContent, Taint, read_slice, taints_of
from policies.gpu.models import MIG_RESOURCE_PREFIX, WHOLE_GPU_RESOURCE
from policies.memo import Memo

__all__ = ["DraInventory", "WithDra", "allocated_devices", "dual_advertised", "read_slice", "read_taint_rule"]

TaintRule = tuple[tuple[str | None, str | None, str | None], tuple[Taint, ...]]  # ((driver, pool, device), taints)


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


def read_taint_rule(raw: Mapping[str, Any]) -> TaintRule | None:
    """A DeviceTaintRule (resource.k8s.io): the devices it selects by driver, pool and device name,
    and its taint where that keeps the scheduler off them; None where it keeps nothing off."""
    spec = raw.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    selector = spec.get("deviceSelector")
    selector = selector if isinstance(selector, Mapping) else {}
    taints = taints_of([spec.get("taint")])
    if not taints:
        return None
    fields = tuple(selector.get(k) if isinstance(selector.get(k), str) else None for k in ("driver", "pool", "device"))
    return (fields[0], fields[1], fields[2]), taints


def dual_advertised(nodes: Iterable[NodeGpus], slices: Iterable[SliceContent | None]) -> frozenset[str]:
    """Nodes whose GPUs both the device plugin (allocatable `nvidia.com/gpu` or `nvidia.com/mig-*`)
    and NVIDIA's DRA driver (its slices' devices on the node) advertise: each may hand out a GPU
    the other already did."""
    advertising = {n.name for n in nodes if any(n.allocatable.values())}
    on_slices = {d.node for s in slices if s is not None for d in s.devices if d.node is not None}
    return frozenset(advertising & on_slices)


def _rule_holds(rule: TaintRule, key: DeviceKey) -> bool:
    return all(want is None or want == have for want, have in zip(rule[0], key, strict=True))


class HeldDevices:
    """What keeps shown devices from a new claim: the devices claims' allocations hold, and the
    taints DeviceTaintRules add; and, worked out from them and the shown devices once per change
    (read on every review), what is free."""

    def __init__(self) -> None:
        self._allocated: dict[object, tuple[DeviceKey, ...]] = {}  # claim -> devices
        self._rules: dict[str, TaintRule] = {}
        # Derived, dropped on any change (here, or of the slices: `forget`)
        self._free: dict[tuple[str, str | None], list[DeviceKey]] | None = None
        self._memory: dict[tuple[str, str], int] = {}
        self._offered: frozenset[str | None] = frozenset()  # profiles devices are of (None: whole GPUs)

    def set_allocation(self, claim: object, devices: tuple[DeviceKey, ...]) -> None:
        if devices:
            self._allocated[claim] = devices
        else:
            self._allocated.pop(claim, None)
        self._free = None

    def replace_allocations(self, allocations: Iterable[tuple[object, tuple[DeviceKey, ...]]]) -> None:
        self._allocated = {claim: devices for claim, devices in allocations if devices}
        self._free = None

    def set_taint_rule(self, name: str, rule: TaintRule | None) -> None:
        if rule is None:
            self._rules.pop(name, None)
        else:
            self._rules[name] = rule
        self._free = None

    def replace_taint_rules(self, rules: Mapping[str, TaintRule]) -> None:
        self._rules = dict(rules)
        self._free = None

    def forget(self) -> None:
        """The shown devices changed: what is free is worked out again when next read."""
        self._free = None

    def tainted(self, device: DraDevice) -> bool:
        return bool(device.taints) or any(_rule_holds(rule, device.key) for rule in self._rules.values())

    def counted(
        self, shown: ShownDevices
    ) -> tuple[dict[tuple[str, str | None], list[DeviceKey]], dict[tuple[str, str], int], frozenset[str | None]]:
        """Free placements per (model, profile), the memory of each profile, the profiles offered."""
        if self._free is None:
            self._free, self._memory, self._offered = self._count(shown)
        return self._free, self._memory, self._offered

    def _count(
        self, shown: ShownDevices
    ) -> tuple[dict[tuple[str, str | None], list[DeviceKey]], dict[tuple[str, str], int], frozenset[str | None]]:
        devices = shown.devices
        totals: dict[tuple[tuple[str, str], Counter], int] = {}
        for content in shown.current:
            for counter, amount in content.counters:
                totals[(content.pool, counter)] = amount
        taken = {key for held in self._allocated.values() for key in held}
        used: dict[tuple[tuple[str, str], Counter], int] = {}
        for device in devices:
            if device.key in taken:
                for counter, amount in device.consumes:
                    pool = (device.key[0], device.key[1])
                    used[(pool, counter)] = used.get((pool, counter), 0) + amount
        free: dict[tuple[str, str | None], list[DeviceKey]] = {}
        memory: dict[tuple[str, str], int] = {}
        placed: dict[tuple[str, str | None], dict[tuple[tuple[str, str], Counter], int]] = {}
        for device in devices:
            if device.model is None or device.kind.type not in ("gpu", "mig"):
                continue  # what the catalog cannot weigh is no target of the MIG rewrite
            key = (device.model, device.profile)
            if device.profile is not None and device.memory_mib is not None:
                profiled = (device.model, device.profile)  # typed as a profile's, not None
                memory[profiled] = min(memory.get(profiled, device.memory_mib), device.memory_mib)
            if device.key in taken or self.tainted(device):
                continue
            # How many of this profile fit at once: each placement counted consumes its counters
            # (in this profile's own tally) before the next is tried, so placements that overlap
            # one counted, or a whole GPU beside a slice, are not offered twice.
            pool = (device.key[0], device.key[1])
            tally = placed.setdefault(key, dict(used))
            fits = all(
                (pool, counter) not in totals or tally.get((pool, counter), 0) + amount <= totals[(pool, counter)]
                for counter, amount in device.consumes
            )
            if fits:
                for counter, amount in device.consumes:
                    tally[(pool, counter)] = tally.get((pool, counter), 0) + amount
                free.setdefault(key, []).append(device.key)
        offered = frozenset(d.profile for d in devices if d.model is not None and d.kind.type in ("gpu", "mig"))
        return free, memory, offered


@dataclass(frozen=True, slots=True)
class ShownDevices:
    """The slices of each pool's newest generation (a driver replaces a pool by publishing a newer
    one), and their devices, by key too: made once a slice change."""

    current: list[SliceContent]
    devices: list[DraDevice]
    by_key: dict[DeviceKey, DraDevice]


def _shown(slices: Iterable[SliceContent]) -> ShownDevices:
    listed = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for content in listed:
        newest[content.pool] = max(newest.get(content.pool, 0), content.generation)
    current = [s for s in listed if s.generation == newest[s.pool]]
    devices = [d for s in current for d in s.devices]
    return ShownDevices(current, devices, {d.key: d for d in devices})


class DraInventory:
    """NVIDIA's devices by slice, less what `held` keeps from a new claim (allocations, taints):
    free placements per (model, profile), and what a request's selectors reach."""

    def __init__(self) -> None:
        self._slices: dict[str, SliceContent] = {}
        self.held = HeldDevices()  # changed by the claim and DeviceTaintRule watches
        # Derived, dropped when the slices change: the devices shown, what selectors reach
        self._shown: ShownDevices | None = None
        self._reach = Memo()
        self.generation = 0  # counts slice changes (policies.gpu.device_reach.DeviceReach)

    # -- changes ---------------------------------------------------------------------------
    def set_slice(self, name: str, content: SliceContent | None) -> None:
        if content is None:
            self._slices.pop(name, None)
        else:
            self._slices[name] = content
        self.replace_slices(self._slices)

    def replace_slices(self, slices: Mapping[str, SliceContent]) -> None:
        self._slices = dict(slices)
        self._shown = None
        self._reach = Memo()
        self.held.forget()
        self.generation += 1

    # -- what requests reach -----------------------------------------------------------------
    def shown(self) -> ShownDevices:
        """The devices the current slices show, worked out once per slice change."""
        if self._shown is None:
            self._shown = _shown(self._slices.values())
        return self._shown

    def devices(self) -> list[DraDevice]:
        """Every device the current slices show."""
        return self.shown().devices

    def reach(self, selectors: tuple[DeviceSelector, ...]) -> Reach | None:
        """The shown devices every one of `selectors` admits (None: none), once per slice change."""
        return self._reach.get(tuple(s.source for s in selectors), lambda: reach_of(selectors, self.devices()))

    def device(self, key: DeviceKey) -> DraDevice | None:
        return self.shown().by_key.get(key)

    @property
    def nodes(self) -> frozenset[str]:
        """The nodes whose devices the slices show."""
        return frozenset(d.node for d in self.devices() if d.node is not None)

    # -- what is free --------------------------------------------------------------------------
    @property
    def known(self) -> bool:
        return bool(self.devices())

    def has_model(self, model: str) -> bool:
        return any(d.model == model for d in self.devices())

    def offers(self, profile: str | None) -> bool:
        """Whether some device is a slice of `profile` (a whole GPU for None), free or not."""
        return profile in self.held.counted(self.shown())[2]

    def free(self, model: str, profile: str | None) -> int:
        return len(self.held.counted(self.shown())[0].get((model, profile), ()))

    def free_for(
        self, selectors: tuple[DeviceSelector, ...], model: str, profile: str | None, skipped: frozenset[str]
    ) -> int:
        """Free devices of `model` and `profile` that `selectors` (a class serving a name) admit,
        on no node of `skipped` (nodes the device plugin counts already)."""
        shown = self.shown()
        keys = self.held.counted(shown)[0].get((model, profile), ())
        admitted = _admitted(self._reach, shown, selectors)
        return sum(1 for key in keys if key in admitted and shown.by_key[key].node not in skipped)

    def offers_for(self, selectors: tuple[DeviceSelector, ...], profile: str | None) -> bool:
        """Whether `selectors` admit some device of `profile` (a whole GPU for None), free or not."""
        shown = self.shown()
        admitted = _admitted(self._reach, shown, selectors)
        return any(d.key in admitted and d.model is not None and d.profile == profile for d in shown.devices)

    def models_for(self, selectors: tuple[DeviceSelector, ...], profile: str | None) -> frozenset[str | None]:
        """The models of the devices of `profile` (whole GPUs for None) `selectors` admit."""
        shown = self.shown()
        admitted = _admitted(self._reach, shown, selectors)
        return frozenset(d.model for d in shown.devices if d.key in admitted and d.profile == profile)

    def memory_mib(self, model: str, profile: str) -> int | None:
        return self.held.counted(self.shown())[1].get((model, profile))


def _admitted(reach: Memo, shown: ShownDevices, selectors: tuple[DeviceSelector, ...]) -> frozenset[DeviceKey]:
    """The shown devices every one of `selectors` admits, kept in `reach` until the slices change."""
    key = ("admitted", tuple(s.source for s in selectors))
    return reach.get(key, lambda: frozenset(d.key for d in shown.devices if all(admits(s, d.cel) for s in selectors)))


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

    def free_for(
        self, selectors: tuple[DeviceSelector, ...], model: str, profile: str | None, skipped: frozenset[str]
    ) -> int: ...

    def offers_for(self, selectors: tuple[DeviceSelector, ...], profile: str | None) -> bool: ...

    def models_for(self, selectors: tuple[DeviceSelector, ...], profile: str | None) -> frozenset[str | None]: ...

    def memory_mib(self, model: str, profile: str) -> int | None: ...

    @property
    def nodes(self) -> frozenset[str]: ...


class WithDra:
    """Capacity from node labels and the device plugin (`labels`), plus what DRA devices offer to
    a resource name a DeviceClass serves (`nvidia.com/gpu` served by NVIDIA's `gpu.nvidia.com`,
    a profile's `nvidia.com/mig-<profile>` by a class of that profile): the devices the serving
    class admits. A node with slices and no GFD label is a GPU node like any other; a node whose
    GPUs the device plugin advertises too (`dual_advertised`) is counted once, by the plugin."""

    def __init__(self, labels: LabelCapacity, inventory: Inventory, classes: Callable[[], DeviceClasses]) -> None:
        self._labels = labels
        self._inventory = inventory
        self._classes = classes

    @property
    def known(self) -> bool:
        return self._labels.known or self._inventory.known

    def dual_advertised(self) -> frozenset[str]:
        """Nodes whose GPUs both the device plugin (allocatable `nvidia.com/gpu` or
        `nvidia.com/mig-*`) and NVIDIA's DRA driver (slices of the node) advertise."""
        if not self._inventory.known:
            return frozenset()
        return self._labels.advertising_nodes() & self._inventory.nodes

    def advertising_nodes(self) -> frozenset[str]:
        return self._labels.advertising_nodes()

    def _served(self, resource: str, profile: str | None) -> tuple[DeviceSelector, ...] | None:
        wanted = _slice_of(resource)
        if wanted is None or wanted[1] != profile or not self._inventory.known:
            return None
        served = self._classes().serving(resource)
        return served.selectors if served is not None else None

    def free(self, model: str, profile: str | None, resource: str) -> int:
        by_labels = self._labels.free(model, profile, resource)
        selectors = self._served(resource, profile)
        if selectors is None:
            return by_labels
        return by_labels + self._inventory.free_for(selectors, model, profile, self.dual_advertised())

    def memory_mib(self, model: str, profile: str) -> int | None:
        found = self._labels.memory_mib(model, profile)
        return found if found is not None else self._inventory.memory_mib(model, profile)

    def has_model(self, model: str) -> bool:
        return self._labels.has_model(model) or self._inventory.has_model(model)

    def plugin_serves(self, resource: str) -> bool:
        return self._labels.plugin_serves(resource)

    def dra_serves(self, resource: str) -> bool:
        wanted = _slice_of(resource)
        selectors = self._served(resource, wanted[1]) if wanted is not None else None
        return selectors is not None and self._inventory.offers_for(selectors, wanted[1] if wanted else None)

    def dra_models(self, resource: str) -> frozenset[str | None] | None:
        wanted = _slice_of(resource)
        if wanted is None or not self._inventory.known:
            return None
        selectors = self._served(resource, wanted[1])
        return frozenset() if selectors is None else self._inventory.models_for(selectors, wanted[1])

    @property
    def dra_known(self) -> bool:
        return self._inventory.known

    def dra_free(self, model: str, profile: str | None) -> int:
        return self._inventory.free(model, profile) if self._inventory.known else 0

    def dra_offers(self, profile: str | None) -> bool:
        return self._inventory.known and self._inventory.offers(profile)
