"""What a DRA ResourceClaim asks for, read from its spec (resource.k8s.io v1, v1beta2 and v1beta1;
a ResourceClaimTemplate's `spec.spec` is the claim it makes), and what that can allocate of
NVIDIA's GPUs once the cluster's DeviceClasses say what each class selects.

A claim is read once, as asked (`ClaimDemand`): per request, its alternatives (one, or the
`firstAvailable` list), each a device class, a count (None: `allocationMode: All`) and what the
request's own selectors pin; and what the guardrails look at: `adminAccess`, tolerations of
device taints, opaque driver configuration. What each alternative can allocate is resolved
against the classes when judged (`resolve`), since classes come and go independently:
- a class whose selectors (and the request's) rule NVIDIA's GPUs out: nothing;
- a MIG profile pinned by either: one `nvidia.com/mig-<profile>` slice a device;
- anything else that may reach a GPU: a whole GPU a device (the most a MIG device is);
- `allocationMode: All`: every device the selectors admit, which nothing here bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policies.errors import InputError
from policies.gpu.device_classes import ANY_DEVICE, NVIDIA_DRIVER, DeviceClasses, Selection, read_selectors
from policies.gpu.device_shares import CapacityAsk, capacity_name, quantity
from policies.gpu.devices import DRA_EXTENDED_PREFIX
from policies.gpu.models import MIG_RESOURCE_PREFIX
from policies.json_fields import json_list

# What a whole device is charged under: a DRA name, which no node's MIG labels turn into a slice.
DRA_WHOLE_GPU = DRA_EXTENDED_PREFIX + "gpu.nvidia.com"
Ask = tuple[tuple[str, int], ...]  # (resource name, count): one way a request can be met


@dataclass(frozen=True, slots=True)
class DeviceAsk:
    """One way a request can be met: `amount` devices of `device_class` (None: all it admits)."""

    device_class: str
    amount: int | None
    selection: Selection  # what the request's own selectors pin
    path: str  # of the request (or its firstAvailable entry) in the claim's spec
    name: str = ""  # a firstAvailable entry's own name
    capacity: CapacityAsk = ()  # consumable capacity asked of each device (policies.gpu.device_shares)


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    name: str
    path: str
    alternatives: tuple[DeviceAsk, ...]
    admin_access: bool = False
    tolerations: bool = False  # tolerates device taints


@dataclass(frozen=True, slots=True)
class ClaimDemand:
    """A claim's requests as asked, and the paths of its opaque driver configurations;
    `allocated`: for a `firstAvailable` request the scheduler has allocated, the entries it took
    (request name, entry name), from the claim's status: what it holds, not the worst it could."""

    requests: tuple[ClaimRequest, ...] = ()
    opaque_config: tuple[str, ...] = ()
    allocated: tuple[tuple[str, str], ...] = ()

    @property
    def asks_devices(self) -> bool:
        return bool(self.requests)

    def alternatives(self, request: ClaimRequest) -> tuple[DeviceAsk, ...]:
        """What the request may hold: the entries allocated, where the status says."""
        if not self.allocated or len(request.alternatives) < 2:
            return request.alternatives
        taken = {entry for name, entry in self.allocated if name == request.name}
        chosen = tuple(a for a in request.alternatives if a.name in taken)
        return chosen or request.alternatives


NO_DEMAND = ClaimDemand()


def unreadable_claim() -> ClaimDemand:
    """What a claim this engine cannot read is taken to ask: every device of a class it does not
    know, which no budget can hold."""
    ask = DeviceAsk("(unreadable)", None, ANY_DEVICE, "spec")
    return ClaimDemand((ClaimRequest("(unreadable)", "spec", (ask,)),))


@dataclass(frozen=True, slots=True)
class Resolved:
    """What one alternative can allocate: `ask` in resource names (() for no GPU), or `unbounded`."""

    ask: Ask
    unbounded: bool = False
    profile: str | None = None  # the MIG profile it is pinned to
    amount: int = 0
    any_mig: bool = False  # may be met by a MIG device of any profile

    @property
    def reaches_gpu(self) -> bool:
        return bool(self.ask) or self.unbounded


def resolve(ask: DeviceAsk, classes: DeviceClasses) -> Resolved:
    """What one alternative can allocate under `classes` (kept by them: they never change)."""
    return classes.memo.get(ask, lambda: _resolve(ask, classes))


def _resolve(ask: DeviceAsk, classes: DeviceClasses) -> Resolved:
    selection = classes.selection(ask.device_class).also(ask.selection)
    if not selection.reaches_gpu:
        return Resolved(())
    profile = selection.profile
    any_mig = profile is None and selection.type in (None, "mig")
    if ask.amount is None:
        return Resolved((), True, profile, 0, any_mig)
    if profile is not None:
        return Resolved(((MIG_RESOURCE_PREFIX + profile, ask.amount),), False, profile, ask.amount)
    return Resolved(((DRA_WHOLE_GPU, ask.amount),), False, None, ask.amount, any_mig)


def _mapping(raw: object, path: str) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be an object")
    return raw


def _ask(exact: Mapping[str, object], path: str, name: str = "") -> DeviceAsk:
    device_class = exact.get("deviceClassName")
    if not isinstance(device_class, str) or not device_class:
        raise InputError(f"{path}.deviceClassName", "must be a non-empty string")
    selection = read_selectors(exact.get("selectors"), f"{path}.selectors")
    if exact.get("allocationMode", "ExactCount") == "All":
        return DeviceAsk(device_class, None, selection, path, name)
    count = exact.get("count", 1)
    if type(count) is not int or count < 1:
        raise InputError(f"{path}.count", "must be a whole number, 1 or more")
    return DeviceAsk(device_class, count, selection, path, name, _capacity(exact.get("capacity"), path))


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
    opaque = tuple(
        f"{path}.devices.config[{i}].opaque"
        for i, config in enumerate(json_list(devices.get("config"), f"{path}.devices.config"))
        if isinstance(config, Mapping) and config.get("opaque") is not None
    )
    return ClaimDemand(requests, opaque)


def with_allocation(demand: ClaimDemand, status: object) -> ClaimDemand:
    """The demand trued down to what a claim's `status.allocation` records for its
    `firstAvailable` requests (results name `<request>/<entry>`); other requests are unchanged."""
    if not isinstance(status, Mapping) or not any(len(r.alternatives) > 1 for r in demand.requests):
        return demand
    allocation = status.get("allocation")
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results = devices.get("results") if isinstance(devices, Mapping) else None
    taken = set()
    for result in results if isinstance(results, list) else ():
        request = result.get("request") if isinstance(result, Mapping) else None
        if isinstance(request, str) and "/" in request:
            name, entry = request.split("/", 1)
            taken.add((name, entry))
    if not taken:
        return demand
    return ClaimDemand(demand.requests, demand.opaque_config, tuple(sorted(taken)))
