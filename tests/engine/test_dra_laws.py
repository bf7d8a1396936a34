"""The law of charging, for DRA: a claim's request is charged at least what any allocation the
scheduler could make holds, whatever its DeviceClass is called and however its selectors are
spelled (escapes, either quote kind, raw strings, macros, bindings, quantities and versions),
with the cluster's devices shown or none; once allocated, a claim is charged what its devices
hold, never less, and never more than before.

The oracle is independent of the engine's reading of CEL: each selector is generated together
with the predicate it means over a device, evaluated on a universe of devices as NVIDIA's driver
publishes them (whole GPUs of models the MIG catalog knows and of ones it does not, MIG devices,
VFIO passthrough, a shareable GPU) beside another driver's. Where Kubernetes' evaluation would
fail on a device (a missing attribute), the scheduler cannot allocate it, so the oracle admits
nothing there."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.gpu.catalog import CATALOG
from policies.gpu.claims import ClaimDemand, claim_demand, with_allocation
from policies.gpu.device_classes import DeviceClasses, read_device_class
from policies.gpu.device_reach import NO_DEVICES, DeviceReach
from policies.gpu.dra_inventory import DraInventory, read_slice
from policies.gpu.placement import ANYWHERE
from policies.judge.device_charge import demand_charge
from tests.support.dra import DRIVER, claim_spec, device_class, exactly, resource_slice
from tests.support.dra_selectors import UNIVERSE, Device, Predicate, Term, selector


@dataclass(frozen=True)
class Ask:
    device_class: str
    count: int | None  # None: allocationMode All
    selector: Term | None

    def request(self, name: str = "") -> dict[str, Any]:
        more: dict[str, Any] = {"name": name} if name else {}
        if self.count is None:
            more["allocationMode"] = "All"
        return exactly(self.device_class, self.count, self.selector[0] if self.selector else "", **more)


CLASS_NAMES = ["one.example.com", "two.example.com", "three.example.com"]
World = tuple[dict[str, Predicate], DeviceClasses, list[list[Ask]]]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    meaning: dict[str, Predicate] = {}
    made = []
    for name in CLASS_NAMES:
        drawn = draw(st.none() | selector())
        meaning[name] = drawn[1] if drawn else (lambda x: True)
        made.append(read_device_class(device_class(name, drawn[0] if drawn else "")))
    meaning["not-made-yet.example.com"] = lambda x: True  # may be made to select anything
    ask = st.builds(Ask, st.sampled_from(sorted(meaning)), st.none() | st.integers(1, 3), st.none() | selector())
    requests = draw(st.lists(st.lists(ask, min_size=1, max_size=3), min_size=1, max_size=3))
    return meaning, DeviceClasses.of(made), requests


def admitted(ask: Ask, meaning: dict[str, Predicate]) -> list[Device]:
    return [d for d in UNIVERSE if meaning[ask.device_class](d) and (ask.selector is None or ask.selector[1](d))]


def holds(ask: Ask, meaning: dict[str, Predicate]) -> Fraction:
    """The most `ask` can be allocated: `count` of the heaviest devices its class and selector
    admit; for all of them, all those of the one node that holds the most."""
    found = admitted(ask, meaning)
    if ask.count is not None:
        return max((d.weight for d in found), default=Fraction(0)) * ask.count
    nodes = {d.node for d in found}
    return max((sum((d.weight for d in found if d.node == n), Fraction(0)) for n in nodes), default=Fraction(0))


def spec_of(requests: list[list[Ask]]) -> dict[str, Any]:
    bodies = []
    for alternatives in requests:
        if len(alternatives) == 1:
            bodies.append(alternatives[0].request())
        else:
            bodies.append({"firstAvailable": [a.request(f"e{j}") for j, a in enumerate(alternatives)]})
    return claim_spec(*bodies)


def shown() -> DraInventory:
    """The universe's NVIDIA devices, as the replica's ResourceSlice watch shows them."""
    inventory = DraInventory()
    slices = {}
    for node in sorted({d.node for d in UNIVERSE}):
        devices = [d.published() for d in UNIVERSE if d.node == node and d.driver == DRIVER]
        made = read_slice(resource_slice(node, *devices), CATALOG)
        assert made is not None
        slices[node] = made
    inventory.replace_slices(slices)
    return inventory


SHOWN = shown()


def charge(demand: ClaimDemand, classes: DeviceClasses, devices: DeviceReach) -> tuple[Fraction, bool]:
    usage, unbounded = demand_charge(demand, classes, devices, ANYWHERE, CATALOG)
    return usage.gpu_equivalents, bool(unbounded)


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_a_claim_is_charged_at_least_what_any_allocation_of_it_holds(world: World) -> None:
    meaning, classes, requests = world
    demand = claim_demand(spec_of(requests))
    for request, alternatives in zip(demand.requests, requests, strict=True):
        alone = ClaimDemand((request,))
        for devices in (NO_DEVICES, SHOWN):
            charged, unbounded = charge(alone, classes, devices)
            for ask in alternatives:
                if ask.count is None and devices is NO_DEVICES:
                    assert unbounded or holds(ask, meaning) == 0, ask
                elif not unbounded:
                    assert charged >= holds(ask, meaning), (ask, devices)


@settings(max_examples=200, deadline=None)
@given(worlds(), st.data())
def test_an_allocated_claim_is_charged_what_it_holds_never_less_nor_more_than_before(world: World, data: Any) -> None:
    meaning, classes, requests = world
    demand = claim_demand(spec_of(requests))
    results, taken = [], Fraction(0)
    for request, alternatives in zip(demand.requests, requests, strict=True):
        entry = data.draw(st.integers(0, len(alternatives) - 1))
        ask = alternatives[entry]
        found = admitted(ask, meaning)
        if not found:
            return  # the scheduler could not allocate the claim at all
        if ask.count is None:  # all its selectors admit, on the one node it allocates from
            node = data.draw(st.sampled_from(sorted({d.node for d in found})))
            picked = [d for d in found if d.node == node]
        else:
            picked = data.draw(st.lists(st.sampled_from(found), min_size=1, max_size=ask.count, unique=True))
        name = request.name if len(alternatives) == 1 else f"{request.name}/e{entry}"
        for device in picked:
            results.append({"request": name, "driver": device.driver, "pool": device.node, "device": device.name})
            taken += device.weight
    status = {"allocation": {"devices": {"results": results}}}
    for devices in (NO_DEVICES, SHOWN):
        before, unbounded = charge(demand, classes, devices)
        after, still = charge(with_allocation(demand, status), classes, devices)
        assert not still
        assert after >= taken
        if devices is SHOWN and not unbounded:
            assert after <= before
