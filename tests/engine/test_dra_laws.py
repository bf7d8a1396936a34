"""The law of charging, for DRA: a claim's request is charged at least what any allocation the
scheduler could make holds, whatever its DeviceClass is called and however its selectors are
written; truing a `firstAvailable` request down to the entry allocated never charges less than
that entry holds, nor more than before.

The oracle is independent of the engine's reading of CEL: each selector is generated together
with the predicate it means, and evaluated on a universe of devices as NVIDIA's driver publishes
them (whole GPUs, MIG devices of every profile, VFIO passthrough) beside another driver's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.gpu.catalog import CATALOG
from policies.gpu.claims import claim_demand, with_allocation
from policies.gpu.device_classes import DeviceClasses, read_device_class
from policies.gpu.placement import ANYWHERE
from policies.judge.claim_usage import demand_charge
from tests.support.dra import claim_spec, device_class, exactly


@dataclass(frozen=True)
class Device:
    driver: str
    type: str | None
    profile: str | None
    weight: Fraction  # GPU-equivalents it holds


MODELS = [CATALOG.model(key) for key in ("H100-80GB", "A100-40GB", "A100-80GB")]
UNIVERSE = [
    *(Device("gpu.nvidia.com", kind, None, Fraction(1)) for kind in ("gpu", "vfio")),
    *(Device("gpu.nvidia.com", "mig", p.name, m.weight(p)) for m in MODELS for p in m.profiles),
    Device("nic.example.com", None, None, Fraction(0)),
]
PROFILES = sorted({d.profile for d in UNIVERSE if d.profile})
Predicate = Callable[[Device], bool]
Term = tuple[str, Predicate]


def _term() -> st.SearchStrategy[Term]:
    attribute = "device.attributes['gpu.nvidia.com']"
    driver = st.sampled_from(["gpu.nvidia.com", "nic.example.com"])
    return st.one_of(
        driver.map(lambda d: (f"device.driver == '{d}'", lambda x, d=d: x.driver == d)),
        st.sampled_from(["gpu", "mig", "vfio"]).map(
            lambda t: (f"{attribute}.type == '{t}'", lambda x, t=t: x.driver == "gpu.nvidia.com" and x.type == t)
        ),
        st.sampled_from(PROFILES).map(lambda p: (f'{attribute}.profile == "{p}"', lambda x, p=p: x.profile == p)),
        st.just((f"{attribute}.productName != ''", lambda x: x.driver == "gpu.nvidia.com")),
        st.just(
            (
                "device.driver == 'nic.example.com' || device.driver == 'gpu.nvidia.com'",
                lambda x: x.driver in ("nic.example.com", "gpu.nvidia.com"),
            )
        ),
        st.just(("!(device.driver == 'nic.example.com')", lambda x: x.driver != "nic.example.com")),
        st.sampled_from(PROFILES).map(
            lambda p: (
                f"!(device.driver == 'nic.example.com' && {attribute}.profile == '{p}')",
                lambda x, p=p: not (x.driver == "nic.example.com" and x.profile == p),
            )
        ),
    )


def _selector() -> st.SearchStrategy[tuple[str, Predicate]]:
    """A conjunction of terms, its text and what it means."""

    def join(terms: list[Term]) -> tuple[str, Predicate]:
        text = " && ".join(f"({t})" if "||" in t else t for t, _ in terms)
        return text, lambda x: all(p(x) for _, p in terms)

    return st.lists(_term(), min_size=1, max_size=3).map(join)


@dataclass(frozen=True)
class Ask:
    device_class: str
    count: int | None  # None: allocationMode All
    selector: tuple[str, Predicate] | None

    def request(self, name: str = "") -> dict[str, Any]:
        more: dict[str, Any] = {"name": name} if name else {}
        if self.count is None:
            more["allocationMode"] = "All"
        return exactly(self.device_class, self.count, self.selector[0] if self.selector else "", **more)


CLASS_NAMES = ["one.example.com", "two.example.com", "three.example.com"]


@st.composite
def worlds(draw: st.DrawFn) -> tuple[dict[str, Predicate], DeviceClasses, list[list[Ask]]]:
    meaning: dict[str, Predicate] = {}
    made = []
    for name in CLASS_NAMES:
        selector = draw(st.none() | _selector())
        meaning[name] = selector[1] if selector else (lambda x: True)
        made.append(read_device_class(device_class(name, selector[0] if selector else "")))
    meaning["not-made-yet.example.com"] = lambda x: True  # may be made to select anything
    ask = st.builds(
        Ask,
        st.sampled_from(sorted(meaning)),
        st.none() | st.integers(1, 4),
        st.none() | _selector(),
    )
    requests = draw(st.lists(st.lists(ask, min_size=1, max_size=3), min_size=1, max_size=3))
    return meaning, DeviceClasses.of(made), requests


def holds(ask: Ask, meaning: dict[str, Predicate]) -> Fraction:
    """The most `ask` can be allocated: `count` of the heaviest devices its class and selector admit."""
    admitted = [d for d in UNIVERSE if meaning[ask.device_class](d) and (ask.selector is None or ask.selector[1](d))]
    heaviest = max((d.weight for d in admitted), default=Fraction(0))
    return heaviest * (ask.count or len(admitted))


def spec_of(requests: list[list[Ask]]) -> dict[str, Any]:
    bodies = []
    for alternatives in requests:
        if len(alternatives) == 1:
            bodies.append(alternatives[0].request())
        else:
            bodies.append({"firstAvailable": [a.request(f"e{j}") for j, a in enumerate(alternatives)]})
    return claim_spec(*bodies)


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_a_claim_is_charged_at_least_what_any_allocation_of_it_holds(world):
    meaning, classes, requests = world
    demand = claim_demand(spec_of(requests))
    for index, (request, alternatives) in enumerate(zip(demand.requests, requests, strict=True)):
        charged, unbounded = demand_charge(type(demand)((request,)), classes, ANYWHERE, CATALOG)
        for ask in alternatives:
            if ask.count is None:
                assert unbounded or holds(ask, meaning) == 0, (index, ask)
            elif not unbounded:
                assert charged.gpu_equivalents >= holds(ask, meaning), (index, ask)


@settings(max_examples=200, deadline=None)
@given(worlds(), st.data())
def test_truing_down_to_the_entry_allocated_holds_it_and_never_charges_more(world, data):
    meaning, classes, requests = world
    demand = claim_demand(spec_of(requests))
    results = []
    for request, alternatives in zip(demand.requests, requests, strict=True):
        if len(alternatives) > 1:
            entry = data.draw(st.integers(0, len(alternatives) - 1))
            results.append((request.name, entry, alternatives[entry]))
    status = {"allocation": {"devices": {"results": [{"request": f"{n}/e{e}"} for n, e, _ in results]}}}
    before, unbounded_before = demand_charge(demand, classes, ANYWHERE, CATALOG)
    after, unbounded_after = demand_charge(with_allocation(demand, status), classes, ANYWHERE, CATALOG)
    if unbounded_before:
        return
    assert not unbounded_after
    assert after.gpu_equivalents <= before.gpu_equivalents
    taken = sum((holds(ask, meaning) for _, _, ask in results if ask.count is not None), Fraction(0))
    assert after.gpu_equivalents >= taken
