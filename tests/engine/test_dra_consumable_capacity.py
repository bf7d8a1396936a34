"""Consumable capacity (Kubernetes 1.36): a device that allows multiple allocations is shared by
claims, each taking part of its capacity. A request is charged the share it takes, as the
scheduler rounds it by the device's requestPolicy, of the device its selectors may get that it
would take most of; a request that asks no capacity, or may land on a device that cannot be
shared or that the cluster does not show, is charged the whole device."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.errors import InputError
from policies.gpu.catalog import CATALOG
from policies.gpu.claims import claim_demand
from policies.gpu.device_shares import SharedCapacity, read_capacities, share_of
from policies.gpu.dra_inventory import DraInventory, read_slice
from policies.judge.quota import NoUsage
from policies.review.cluster import KnownCluster
from tests.support.builders import engine_from, policy
from tests.support.dra import claim, claim_pod, claim_spec, cluster, exactly, resource_slice, shareable, slice_device

H100 = slice_device("gpu-0", "NVIDIA H100 80GB HBM3", memory="80Gi")
BUDGET = policy("budget", 'match: {namespaces: [ml]}\nquota: {limits: {gpuEquivalents: "8"}}')


def charged(*devices: dict[str, Any], capacity: dict[str, str] | None = None, count: int = 1) -> Fraction:
    """GPU-equivalents a pod naming one claim of `count` GPUs (asking `capacity` of each) is
    charged on a node whose slice holds `devices`."""
    inventory = DraInventory()
    inventory.replace_slices({"node-a": read_slice(resource_slice("node-a", *devices), CATALOG)})
    asked = {"capacity": {"requests": capacity}} if capacity else {}
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", count, **asked)))
    known = cluster(made)
    state = KnownCluster(claims=known.claims, knows_claims=True, device_classes=known.device_classes, devices=inventory)
    decision = engine_from(BUDGET).validate(claim_pod("c"), NoUsage(), cluster=state)
    assert decision.allowed, decision.message
    return decision.usage.gpu_equivalents


@pytest.mark.parametrize(
    "devices, capacity, expected",
    [
        pytest.param([shareable(H100)], {"memory": "10Gi"}, Fraction(1, 8), id="the-share-asked-of-a-shared-gpu"),
        pytest.param([shareable(H100)], None, Fraction(1), id="asking-no-capacity-is-the-whole-device"),
        pytest.param([H100], {"memory": "10Gi"}, Fraction(1), id="a-device-that-cannot-be-shared"),
        pytest.param([], {"memory": "10Gi"}, Fraction(1), id="no-device-known"),
        pytest.param(
            [shareable(H100, {"default": "0", "validRange": {"min": "0", "step": "20Gi"}})],
            {"memory": "10Gi"},
            Fraction(1, 4),
            id="rounded-up-to-a-whole-step",
        ),
        pytest.param(
            [shareable(H100, {"default": "0", "validValues": ["40Gi", "80Gi"]})],
            {"memory": "10Gi"},
            Fraction(1, 2),
            id="raised-to-the-smallest-valid-value",
        ),
        pytest.param(
            [shareable(H100), slice_device("gpu-1", "NVIDIA H100 80GB HBM3", memory="80Gi")],
            {"memory": "10Gi"},
            Fraction(1),
            id="one-device-it-may-get-cannot-be-shared",
        ),
        pytest.param(
            [shareable(H100), shareable(slice_device("gpu-1", "NVIDIA A100-SXM4-40GB", memory="40Gi"))],
            {"memory": "10Gi"},
            Fraction(1, 4),
            id="the-device-it-would-take-most-of",
        ),
        pytest.param([shareable(H100)], {"cores": "1"}, Fraction(1), id="a-capacity-the-device-does-not-have"),
        pytest.param([shareable(H100)], {"memory": "0"}, Fraction(1), id="an-amount-of-nothing-is-the-whole-device"),
        pytest.param(
            [shareable(H100, {"default": "0", "validRange": {"min": "0"}})],
            {"memory": "0"},
            Fraction(1),
            id="an-amount-a-policy-rounds-to-nothing-is-the-whole-device",
        ),
        pytest.param(
            [shareable(slice_device("gpu-0", "NVIDIA L40S", memory="48Gi"))],
            {"memory": "12Gi"},
            Fraction(1, 4),
            id="a-gpu-the-mig-catalog-does-not-know-is-shared-by-its-own-memory",
        ),
    ],
)
def test_a_request_is_charged_the_share_it_takes_of_the_device_it_may_get(devices, capacity, expected):
    assert charged(*devices, capacity=capacity) == expected


def test_each_device_of_a_count_is_charged_its_share():
    assert charged(shareable(H100), capacity={"memory": "20Gi"}, count=2) == Fraction(1, 2)


def test_a_malformed_capacity_names_its_field():
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", capacity={"requests": {"memory": "lots"}})))
    with pytest.raises(InputError) as refused:
        engine_from(BUDGET).validate(made, NoUsage(), cluster=cluster())
    assert refused.value.path == "spec.devices.requests[0].exactly.capacity.requests.memory"


amounts = st.fractions(min_value=0, max_value=200, max_denominator=4)


@given(
    total=st.fractions(min_value=1, max_value=200, max_denominator=4),
    asked=st.one_of(st.none(), amounts),
    minimum=st.one_of(st.none(), amounts),
    step=st.one_of(st.none(), st.fractions(min_value=Fraction(1, 4), max_value=50, max_denominator=4)),
    valid=st.lists(amounts, max_size=4),
)
def test_an_allocation_takes_at_least_what_it_asks_and_never_more_than_the_device(total, asked, minimum, step, valid):
    """Whatever the policy, the amount charged covers what the scheduler may give (never less than
    asked, the whole device where it cannot say) and never passes the device: a share is 0 to 1."""
    capacity = SharedCapacity("memory", total, None, tuple(valid), minimum, step if minimum is not None else None)
    taken = capacity.consumed(asked)
    assert 0 <= taken <= total
    if asked is not None:
        assert taken >= min(asked, total)
    share = share_of((capacity,), (("memory", asked),) if asked is not None else ())
    assert 0 <= share <= 1


def test_capacities_are_read_as_the_driver_publishes_them_with_or_without_its_domain():
    published = {"gpu.nvidia.com/memory": {"value": "80Gi", "requestPolicy": {"default": "0"}}}
    found = read_capacities(published, "gpu.nvidia.com")
    assert found == (SharedCapacity("memory", Fraction(80 * 2**30), Fraction(0), (), None, None),)
    asked = {"requests": {"gpu.nvidia.com/memory": "1Gi"}}
    demand = claim_demand(claim_spec(exactly("gpu.nvidia.com", capacity=asked)))
    assert demand.requests[0].alternatives[0].capacity == (("memory", Fraction(2**30)),)
