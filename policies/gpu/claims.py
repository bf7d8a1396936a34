"""What a DRA ResourceClaim asks for, read from its spec (resource.k8s.io v1, v1beta2 and v1beta1;
a ResourceClaimTemplate's `spec.spec` is the claim it makes), and what that can allocate of
NVIDIA's GPUs once the cluster's DeviceClasses and devices say what each request reaches.

A claim is read once, as asked (`ClaimDemand`): per request, its alternatives (one, or the
`firstAvailable` list), each a device class, a count (None: `allocationMode: All`) and its own
selectors, compiled; and what the guardrails look at: `adminAccess`, tolerations of device
taints, driver configuration (NVIDIA's own, policies.gpu.driver_config, or opaque to us). Once the
scheduler allocated it, the devices its status records, with the capacity each consumed. What
each alternative can allocate is resolved when judged (`resolve`), since classes and devices come
and go independently of claims:
- the devices its class's and its own selectors admit, of those ResourceSlices show
  (policies.gpu.device_reach): the worst of them, a device;
- where none shown is admitted, what the selectors prove: nothing for another driver's devices,
  a slice for a pinned MIG profile, else a whole GPU a device (the most a MIG device is);
- `allocationMode: All`: every device its selectors admit, bounded by the most any one node
  holds of those shown; unbounded where none is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from policies.errors import InputError
from policies.gpu.device_cel import ANY_DEVICE, NVIDIA_DRIVER, Selection
from policies.gpu.device_classes import DeviceClasses, Selectors, read_selectors
from policies.gpu.device_reach import DeviceReach, NodeHolding, Reach
from policies.gpu.device_shares import CapacityAsk, capacity_name, quantity
from policies.gpu.dra_devices import ANY_MIG, WHOLE_GPU, DeviceKey, DeviceKind
from policies.gpu.driver_config import DriverConfig, read_config
from policies.json_fields import json_list
from policies.memo import Memo


@dataclass(frozen=True, slots=True)
class DeviceAsk:
    """One way a request can be met: `amount` devices of `device_class` (None: all it admits)."""

    device_class: str
    amount: int | None
    selection: Selection  # what the request's own selectors prove
    path: str  # of the request (or its firstAvailable entry) in the claim's spec
    name: str = ""  # a firstAvailable entry's own name
    capacity: CapacityAsk = ()  # consumable capacity asked of each device (policies.gpu.device_shares)
    selectors: Selectors = ()  # the request's own, compiled


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    name: str
    path: str
    alternatives: tuple[DeviceAsk, ...]
    admin_access: bool = False
    tolerations: bool = False  # tolerates device taints


@dataclass(frozen=True, slots=True)
class HeldDevice:
    """One device an allocation holds: the request (`<request>` or `<request>/<entry>`) it met,
    the device, and what the allocation records it consumed of its capacities."""

    request: str
    key: DeviceKey
    consumed: CapacityAsk = ()


@dataclass(frozen=True, slots=True)
class ClaimDemand:
    """A claim's requests as asked, and its driver configurations; `allocated`: for a
    `firstAvailable` request the scheduler has allocated, the entries it took (request name, entry
    name); `held`: every device the allocation holds (None: not allocated), from the claim's
    status: what it holds, not the worst it could."""

    requests: tuple[ClaimRequest, ...] = ()
    configs: tuple[DriverConfig, ...] = ()
    allocated: tuple[tuple[str, str], ...] = ()
    held: tuple[HeldDevice, ...] | None = None
    # What it is charged and what policies say of it, per classes, devices and policies (a claim
    # the cluster holds is read once, judged for every pod that names it): policies.judge.
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)

    @property
    def asks_devices(self) -> bool:
        return bool(self.requests)

    @property
    def opaque_config(self) -> tuple[str, ...]:
        """The paths of the configurations no one here understands."""
        return tuple(c.path for c in self.configs if c.sharing is None)

    def alternatives(self, request: ClaimRequest) -> tuple[DeviceAsk, ...]:
        """What the request may hold: the entries allocated, where the status says."""
        if not self.allocated or len(request.alternatives) < 2:
            return request.alternatives
        taken = {entry for name, entry in self.allocated if name == request.name}
        chosen = tuple(a for a in request.alternatives if a.name in taken)
        return chosen or request.alternatives

    def sharing(self, request: str) -> str | None:
        """How NVIDIA's driver shares the devices of `request` by the claim's configuration
        (TimeSlicing, MPS, Passthrough), if it does."""
        for config in reversed(self.configs):  # the driver applies the last that names it
            if config.sharing and (not config.requests or request in config.requests):
                return config.sharing
        return None


NO_DEMAND = ClaimDemand()


def unreadable_claim() -> ClaimDemand:
    """What a claim this engine cannot read is taken to ask: every device of a class it does not
    know, which no budget can hold."""
    ask = DeviceAsk("(unreadable)", None, ANY_DEVICE, "spec")
    return ClaimDemand((ClaimRequest("(unreadable)", "spec", (ask,)),))


@dataclass(frozen=True, slots=True)
class Resolved:
    """What one alternative can allocate: `amount` devices (None: all its selectors admit), each
    any of `kinds` (() for no GPU); `shown`: the kinds are devices ResourceSlices show (else what
    its selectors prove of a device no slice shows); `nodes`: for all its selectors admit, what
    each node holds of them."""

    kinds: tuple[DeviceKind, ...]
    amount: int | None
    shown: bool = False
    nodes: tuple[NodeHolding, ...] = ()

    @property
    def reaches_gpu(self) -> bool:
        return bool(self.kinds)

    @property
    def unbounded(self) -> bool:
        """All the devices its selectors admit, and no shown device bounds that."""
        return self.amount is None and bool(self.kinds) and not self.nodes

    @property
    def profiles(self) -> tuple[str | None, ...]:
        """The MIG profiles a device it gets may be of (None: any profile), in order."""
        return tuple(dict.fromkeys(k.profile for k in self.kinds if k.mig))

    @property
    def profile(self) -> str | None:
        """The one MIG profile every device it gets is of, if so."""
        profiles = self.profiles
        return profiles[0] if len(profiles) == 1 and all(k.mig for k in self.kinds) else None

    @property
    def any_mig(self) -> bool:
        return None in self.profiles


def resolve(ask: DeviceAsk, classes: DeviceClasses, devices: DeviceReach) -> Resolved:
    """What one alternative can allocate under `classes` and the shown `devices` (kept by the
    classes per reach: neither changes under them)."""
    selection = classes.selection(ask.device_class).also(ask.selection)
    class_selectors = classes.selectors(ask.device_class)
    reach = None
    if selection.reaches_gpu and class_selectors is not None:
        reach = devices.reach(class_selectors + ask.selectors)
    return classes.memo.get((ask, reach), lambda: _resolved(ask, selection, reach))


def proven(ask: DeviceAsk, classes: DeviceClasses) -> tuple[DeviceKind, ...]:
    """What a device that met `ask` can be, by what its selectors prove alone (whatever the
    slices show now): nothing of NVIDIA's, a slice of a pinned profile, else a whole GPU."""
    return _resolved(ask, classes.selection(ask.device_class).also(ask.selection), None).kinds


def _resolved(ask: DeviceAsk, selection: Selection, reach: Reach | None) -> Resolved:
    if not selection.reaches_gpu:
        return Resolved((), ask.amount)
    if reach is not None:
        return Resolved(reach.kinds, ask.amount, True, reach.nodes if ask.amount is None else ())
    if selection.profile is not None:
        return Resolved((DeviceKind("mig", None, selection.profile),), ask.amount)
    return Resolved((ANY_MIG if selection.type == "mig" else WHOLE_GPU,), ask.amount)


def _mapping(raw: object, path: str) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be an object")
    return raw


def _ask(exact: Mapping[str, object], path: str, name: str = "") -> DeviceAsk:
    device_class = exact.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class:
        raise InputError(f"{path}.deviceClassName", "must be a non-empty string")
    selectors, selection = read_selectors(exact.get("selectors"), f"{path}.selectors")
    if exact.get("allocationMode", "ExactCount") == "All":
        return DeviceAsk(device_class, None, selection, path, name, (), selectors)
    count = exact.get("count", 1)
    if type(count) is not int or count < 1:
        raise InputError(f"{path}.count", "must be a whole number, 1 or more")
    capacity = _capacity(exact.get("capacity"), path)
    return DeviceAsk(device_class, count, selection, path, name, capacity, selectors)


def _capacity(raw: object, path: str) -> CapacityAsk:
    """`capacity.requests`: what the request asks of each device's consumable capacities."""
    if raw is None:
        return ()
    requests = _mapping(raw, f"{path}.capacity").get("requests")
    if requests is None:
        return ()
    asked = []
    for name, amount in _mapping(requests, f"{path}.capacity.requests").items():
        value = quantity(amount)
        if value is None or value < 0:
            field = f".{name}" if str(name).isprintable() else ""
            raise InputError(f"{path}.capacity.requests{field}", "must be a quantity")
        asked.append((capacity_name(str(name), NVIDIA_DRIVER), value))
    return tuple(sorted(asked))


def _request(request: Mapping[str, object], i: int, path: str) -> ClaimRequest:
    name = str(request.get("name", i))
    here = f"{path}[{i}]"
    if "firstAvailable" in request:
        options = json_list(request.get("firstAvailable"), f"{here}.firstAvailable")
        where = [f"{here}.firstAvailable[{j}]" for j in range(len(options))]
        exacts = [_mapping(o, w) for o, w in zip(options, where, strict=True)]
    else:  # v1 and v1beta2 say `exactly`; v1beta1 has the fields on the request itself
        where = [f"{here}.exactly" if "exactly" in request else here]
        exacts = [_mapping(request.get("exactly", request), where[0])]
    alternatives = tuple(_ask(e, w, str(e.get("name", ""))) for e, w in zip(exacts, where, strict=True))
    return ClaimRequest(
        name,
        here,
        alternatives,
        admin_access=any(e.get("adminAccess") is True for e in exacts),
        tolerations=any(bool(e.get("tolerations")) for e in exacts),
    )


def claim_demand(spec: object, path: str = "spec") -> ClaimDemand:
    """The demand of a ResourceClaimSpec (`spec` of a claim, `spec.spec` of a template)."""
    if spec is None:
        return NO_DEMAND
    devices = _mapping(spec, path).get("devices")
    if devices is None:
        return NO_DEMAND
    devices = _mapping(devices, f"{path}.devices")
    where = f"{path}.devices.requests"
    requests = tuple(
        _request(_mapping(raw, f"{where}[{i}]"), i, where)
        for i, raw in enumerate(json_list(devices.get("requests"), where))
    )
    where = f"{path}.devices.config"
    configs = tuple(
        found
        for i, config in enumerate(json_list(devices.get("config"), where))
        if (found := read_config(config, f"{where}[{i}]")) is not None
    )
    return ClaimDemand(requests, configs)


def _consumed(raw: object) -> CapacityAsk:
    if not isinstance(raw, Mapping):
        return ()
    found = ((capacity_name(str(k), NVIDIA_DRIVER), quantity(v)) for k, v in raw.items())
    return tuple(sorted((k, v) for k, v in found if v is not None))


def with_allocation(demand: ClaimDemand, status: object) -> ClaimDemand:
    """The demand with what a claim's `status.allocation` records: the devices it holds (and what
    each consumed of a shared device), and for its `firstAvailable` requests the entries taken
    (results name `<request>/<entry>`)."""
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results = devices.get("results") if isinstance(devices, Mapping) else None
    if not isinstance(results, list):
        return demand
    held: list[HeldDevice] = []
    taken = set()
    for result in results:
        if not isinstance(result, Mapping) or not all(
            isinstance(result.get(k), str) for k in ("request", "driver", "pool", "device")
        ):
            continue
        request = str(result["request"])
        key = (str(result["driver"]), str(result["pool"]), str(result["device"]))
        held.append(HeldDevice(request, key, _consumed(result.get("consumedCapacity"))))
        if "/" in request:
            name, entry = request.split("/", 1)
            taken.add((name, entry))
    entries = tuple(sorted(taken)) if any(len(r.alternatives) > 1 for r in demand.requests) else ()
    return ClaimDemand(demand.requests, demand.configs, entries, tuple(held))
