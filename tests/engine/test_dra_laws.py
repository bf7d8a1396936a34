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

from collections.abc import Callable
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

GIB = 2**30


@dataclass(frozen=True)
class Device:
    node: str
    name: str
    driver: str
    type: str
    product: str
    profile: str | None
    memory: int | None  # bytes
    version: str  # driverVersion
    weight: Fraction  # GPU-equivalents it holds

    def published(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "type": {"string": self.type},
            "productName": {"string": self.product},
            "driverVersion": {"version": self.version},
        }
        if self.profile:
            attributes["profile"] = {"string": self.profile}
        device: dict[str, Any] = {"name": self.name, "attributes": attributes}
        if self.memory is not None:
            device["capacity"] = {"memory": {"value": str(self.memory)}}
        return device


def _mig(node: str, name: str, model: str, product: str, profile: str, version: str) -> Device:
    found = CATALOG.model(model)
    slice_ = found.profile(profile)
    assert slice_ is not None
    return Device(node, name, DRIVER, "mig", product, profile, slice_.memory_gb * GIB, version, found.weight(slice_))


H100, A100, L40S = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA L40S"
UNIVERSE = [
    Device("node-a", "gpu-0", DRIVER, "gpu", H100, None, 80 * GIB, "550.54.15", Fraction(1)),
    _mig("node-a", "gpu-1-mig-0", "H100-80GB", H100, "1g.10gb", "550.54.15"),
    _mig("node-a", "gpu-1-mig-1", "H100-80GB", H100, "3g.40gb", "550.54.15"),
    _mig("node-b", "gpu-0-mig-0", "A100-40GB", A100, "1g.5gb", "535.104.5"),
    _mig("node-b", "gpu-0-mig-1", "A100-40GB", A100, "7g.40gb", "535.104.5"),
    Device("node-b", "gpu-vfio-1", DRIVER, "vfio", A100, None, None, "535.104.5", Fraction(1)),
    Device("node-c", "gpu-0", DRIVER, "gpu", L40S, None, 48 * GIB, "570.86.10", Fraction(1)),
    Device("node-c", "gpu-1", DRIVER, "gpu", L40S, None, 48 * GIB, "570.86.10", Fraction(1)),
    Device("node-c", "nic-0", "nic.example.com", "nic", "ConnectX-7", None, None, "1.0.0", Fraction(0)),
]
PROFILES = sorted({d.profile for d in UNIVERSE if d.profile})
Predicate = Callable[[Device], bool]
Term = tuple[str, Predicate]
NVIDIA = "device.attributes['gpu.nvidia.com']"


def _nvidia(d: Device) -> bool:
    return d.driver == DRIVER


# The same literal, as the scheduler decodes it, in the spellings CEL allows.
def _spellings(value: str) -> st.SearchStrategy[str]:
    hexed = "".join(f"\\x{ord(c):02x}" if c == "a" else c for c in value)
    octal = "".join(f"\\{ord(c):03o}" if c == "g" else c for c in value)
    return st.sampled_from([f"'{value}'", f'"{value}"', f"r'{value}'", f"'{hexed}'", f"'{octal}'", f"'''{value}'''"])


def _driver_term() -> st.SearchStrategy[Term]:
    driver = st.sampled_from([DRIVER, "nic.example.com"])
    return driver.flatmap(
        lambda d: _spellings(d).map(lambda text, d=d: (f"device.driver == {text}", lambda x, d=d: x.driver == d))
    )


def _type_term() -> st.SearchStrategy[Term]:
    kind = st.sampled_from(["gpu", "mig", "vfio"])
    return kind.flatmap(
        lambda t: _spellings(t).map(
            lambda text, t=t: (f"{NVIDIA}.type == {text}", lambda x, t=t: _nvidia(x) and x.type == t)
        )
    )


def _profile_term() -> st.SearchStrategy[Term]:
    def forms(p: str) -> list[Term]:
        has = lambda x, p=p: _nvidia(x) and x.profile == p  # noqa: E731
        return [
            (f"{NVIDIA}.profile == '{p}'", has),
            (f"{NVIDIA}['profile'] in ['{p}']", has),
            (f"['{p}', 'none'].exists(q, has({NVIDIA}.profile) && q == {NVIDIA}.profile)", has),
            (f"cel.bind(a, {NVIDIA}, has(a.profile) && a.profile == '{p}')", has),
        ]

    return st.sampled_from(PROFILES).flatmap(lambda p: st.sampled_from(forms(p)))


OTHER_TERMS: list[Term] = [
    (f"{NVIDIA}.productName.startsWith('NVIDIA H100')", lambda x: _nvidia(x) and x.product.startswith("NVIDIA H100")),
    (f"{NVIDIA}.productName.contains('A100')", lambda x: _nvidia(x) and "A100" in x.product),
    (f"{NVIDIA}.productName.matches('L40')", lambda x: _nvidia(x) and "L40" in x.product),
    (
        f'{NVIDIA}.productName != "x && device.driver == \'nic.example.com"',
        lambda x: _nvidia(x),
    ),
    (
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        lambda x: _nvidia(x) and x.memory is not None and x.memory >= 40 * GIB,
    ),
    (
        "device.capacity['gpu.nvidia.com'].memory == quantity('81920Mi')",
        lambda x: _nvidia(x) and x.memory == 80 * GIB,
    ),
    (
        f"{NVIDIA}.driverVersion.isGreaterThan(semver('550.0.0'))",
        lambda x: _nvidia(x) and tuple(int(p) for p in x.version.split(".")) > (550, 0, 0),
    ),
    (f"has({NVIDIA}.profile)", lambda x: _nvidia(x) and x.profile is not None),
    (f"!has({NVIDIA}.profile)", lambda x: not (_nvidia(x) and x.profile is not None)),
    (
        "device.driver == 'nic.example.com' || device.driver == 'gpu.nvidia.com'",
        lambda x: x.driver in ("nic.example.com", DRIVER),
    ),
    ("!(device.driver == 'nic.example.com')", lambda x: x.driver != "nic.example.com"),
    # A domain no device publishes reads as an empty map in Kubernetes, an error here.
    ("device.attributes['dra.example.com'].size() == 0", lambda x: True),
]


def _term() -> st.SearchStrategy[Term]:
    return st.one_of(_driver_term(), _type_term(), _profile_term(), st.sampled_from(OTHER_TERMS))


def _selector() -> st.SearchStrategy[Term]:
    """A conjunction of terms: its text and what it means."""

    def join(terms: list[Term]) -> Term:
        text = " && ".join(f"({t})" for t, _ in terms)
        return text, lambda x: all(p(x) for _, p in terms)

    return st.lists(_term(), min_size=1, max_size=3).map(join)


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
        selector = draw(st.none() | _selector())
        meaning[name] = selector[1] if selector else (lambda x: True)
        made.append(read_device_class(device_class(name, selector[0] if selector else "")))
    meaning["not-made-yet.example.com"] = lambda x: True  # may be made to select anything
    ask = st.builds(Ask, st.sampled_from(sorted(meaning)), st.none() | st.integers(1, 3), st.none() | _selector())
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
