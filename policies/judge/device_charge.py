"""DRA devices charged in the units quotas count: a request at the worst device it may get, a claim
the scheduler allocated at the devices it holds.

A device's charge by its kind (policies.gpu.dra_devices): a whole GPU (`gpu`, `vfio`, a type
the catalog cannot weigh) one GPU-equivalent and one whole GPU; a MIG device its profile's weight
on its model and one slice of the profile (a whole GPU's worth where the catalog does not know the
two); a MIG profile a selector pins where no slice shows a device, what it weighs on the heaviest
model the pod may land on (policies.gpu.placement). A request asking consumable capacity takes
the share of each shareable device it rounds to (policies.gpu.device_shares), the devices it
touches still counted whole in `gpus` and slices; one NVIDIA's driver shares by the claim's
configuration (time-slicing, MPS) is held as shares (`quota.sharedWeight` weighs them), and one it
passes through to a virtual machine is a whole GPU.
"""

from __future__ import annotations

from fractions import Fraction

from policies.gpu.catalog import Catalog
from policies.gpu.claims import ClaimDemand, ClaimRequest, DeviceAsk, proven, resolve
from policies.gpu.device_cel import NVIDIA_DRIVER
from policies.gpu.device_classes import DeviceClasses
from policies.gpu.device_reach import DeviceReach, NodeHolding
from policies.gpu.device_shares import CapacityAsk, consumed_share, share_of
from policies.gpu.dra_devices import WHOLE_GPU, DeviceKind
from policies.gpu.driver_config import MPS, PASSTHROUGH, TIME_SLICING
from policies.gpu.models import MIG_RESOURCE_PREFIX
from policies.gpu.placement import Placement
from policies.judge.usage import EMPTY, Usage, charged

_ONE = Fraction(1)


def most(a: Usage, b: Usage) -> Usage:
    """The more of two charges, dimension by dimension: what one of them, whichever, may hold."""
    slices = {k: max(a.slices.get(k, 0), b.slices.get(k, 0)) for k in a.slices.keys() | b.slices.keys()}
    return Usage(
        max(a.gpu_equivalents, b.gpu_equivalents),
        slices,
        max(a.gpus, b.gpus),
        max(a.pods, b.pods),
        max(a.shared_equivalents, b.shared_equivalents),
    )


def kind_charge(
    kind: DeviceKind,
    count: int,
    placement: Placement,
    catalog: Catalog,
    share: Fraction = _ONE,
    sharing: str | None = None,
) -> Usage:
    """`count` devices of `kind`, each taken `share` of, shared by the claim as `sharing` says."""
    if sharing == PASSTHROUGH or not kind.mig:
        held = Usage(Fraction(count), {}, count)
    elif kind.profile is None:
        held = Usage(Fraction(count), {}, count)  # a MIG device of any profile: the most one is
    elif kind.model is None or not catalog.has_model(kind.model):
        # A profile no shown device carries: its weight where the pod may land (the catalog's
        # figure, a whole GPU's worth for one it does not know).
        held = charged({MIG_RESOURCE_PREFIX + kind.profile: count}, placement, catalog)
    else:
        model = catalog.model(kind.model)
        profile = model.profile(kind.profile)
        weight = model.weight(profile) if profile is not None else _ONE
        held = Usage(weight * count, {kind.profile: count})
    if share < 1:
        held = Usage(held.gpu_equivalents * share, held.slices, held.gpus, held.pods, held.shared_equivalents * share)
    if sharing in (TIME_SLICING, MPS):
        held = Usage(Fraction(0), held.slices, held.gpus, held.pods, held.shared_equivalents + held.gpu_equivalents)
    return held


def _share(kind: DeviceKind, asked: CapacityAsk) -> Fraction:
    """The share of a device of `kind` a request asking `asked` takes; a device that cannot be
    shared, or whose weight the catalog cannot tell (a MIG device of a model it does not know),
    is taken whole."""
    if not asked or kind.shares is None or (kind.mig and kind.model is None):
        return _ONE
    return share_of(kind.shares, asked)


def _holding(
    holding: NodeHolding, ask: DeviceAsk, placement: Placement, catalog: Catalog, sharing: str | None
) -> Usage:
    total = EMPTY
    for kind, count in holding:
        total = total + kind_charge(kind, count, placement, catalog, _share(kind, ask.capacity), sharing)
    return total


def request_charge(
    request: ClaimRequest,
    classes: DeviceClasses,
    devices: DeviceReach,
    placement: Placement,
    catalog: Catalog,
    alternatives: tuple[DeviceAsk, ...] | None = None,
    sharing: str | None = None,
) -> tuple[Usage, bool]:
    """What one request can allocate at most (of `alternatives`, where the allocation narrowed
    them), and whether some alternative is unbounded (all its selectors admit, none shown)."""
    worst = EMPTY
    unbounded = False
    for ask in request.alternatives if alternatives is None else alternatives:
        resolved = resolve(ask, classes, devices)
        if resolved.unbounded:
            unbounded = True
            continue
        if resolved.amount is None:  # all it admits: the most any one node holds of those
            for holding in resolved.nodes:
                worst = most(worst, _holding(holding, ask, placement, catalog, sharing))
            continue
        for kind in resolved.kinds:
            held = kind_charge(kind, resolved.amount, placement, catalog, _share(kind, ask.capacity), sharing)
            worst = most(worst, held)
    return worst, unbounded


def _entry(demand: ClaimDemand, request: str) -> DeviceAsk | None:
    """The alternative an allocation result names (`<request>` or `<request>/<entry>`)."""
    name, _, entry = request.partition("/")
    for found in demand.requests:
        if found.name == name:
            return next((a for a in found.alternatives if not entry or a.name == entry), None)
    return None


def held_charge(
    demand: ClaimDemand, classes: DeviceClasses, devices: DeviceReach, placement: Placement, catalog: Catalog
) -> Usage:
    """What an allocated claim holds: each device its status records, at what it consumed of it;
    another driver's devices nothing; one of NVIDIA's driver no slice shows, the worst device the
    request it met is proven to get (a whole GPU where that is not known either)."""
    total = EMPTY
    for held in demand.held or ():
        if held.key[0] != NVIDIA_DRIVER:
            continue
        sharing = demand.sharing(held.request.split("/", 1)[0])
        device = devices.device(held.key)
        if device is not None:
            kind = device.kind
            share = consumed_share(kind.shares, held.consumed) if kind.shares is not None else _ONE
            total = total + kind_charge(kind, 1, placement, catalog, share, sharing)
            continue
        ask = _entry(demand, held.request)
        kinds = proven(ask, classes) if ask is not None else ()
        worst = EMPTY
        for kind in kinds or (WHOLE_GPU,):
            worst = most(worst, kind_charge(kind, 1, placement, catalog, _ONE, sharing))
        total = total + worst
    return total


def demand_charge(
    demand: ClaimDemand, classes: DeviceClasses, devices: DeviceReach, placement: Placement, catalog: Catalog
) -> tuple[Usage, tuple[str, ...]]:
    """What a claim can allocate (what it holds, once allocated), and its unbounded requests:
    kept with the claim per classes, devices and placement (the value holds the classes, so the
    identity in its key is never another's)."""
    key = ("charge", id(classes), devices.generation, placement, id(catalog))
    kept = demand.memo.get(
        key, lambda: (classes, catalog, _demand_charge(demand, classes, devices, placement, catalog))
    )
    return kept[2]


def _demand_charge(
    demand: ClaimDemand, classes: DeviceClasses, devices: DeviceReach, placement: Placement, catalog: Catalog
) -> tuple[Usage, tuple[str, ...]]:
    if demand.held is not None:
        return held_charge(demand, classes, devices, placement, catalog), ()
    usage = EMPTY
    unbounded: list[str] = []
    for request in demand.requests:
        alternatives = demand.alternatives(request)
        sharing = demand.sharing(request.name)
        worst, endless = request_charge(request, classes, devices, placement, catalog, alternatives, sharing)
        usage = usage + worst
        if endless:
            unbounded.append(request.name)
    return usage, tuple(unbounded)
