"""What a DRA request can reach, read as the scheduler reads it: selectors evaluated in DRA's CEL
environment over every device of NVIDIA's driver the cluster's ResourceSlices show (GPUs the MIG
catalog does not know included), proven from the compiler's checked tree where none is shown;
shares as the scheduler consumes them; every extended resource a class serves; allocations held
to what they hold; NVIDIA's sharing configurations charged, not refused."""

from __future__ import annotations

import threading
from fractions import Fraction
from typing import Any

import pytest

from policies.errors import InputError
from policies.gpu.claims import claim_demand
from policies.gpu.device_cel import compile_selector
from policies.judge.quota import NoUsage
from tests.support.builders import engine_from, pod, policy
from tests.support.dra import (
    MIG_CLASS,
    claim,
    claim_pod,
    claim_spec,
    cluster,
    device_class,
    exactly,
    inventory,
    profile_class,
    resource_slice,
    shareable,
    slice_device,
)
from webhook.sources.policy_files import bundled_texts

TWO_GPUS = policy("two", "match: {namespaces: [ml]}\nquota: {limits: {gpus: 2}}")
BUDGET = policy("budget", 'match: {namespaces: [ml]}\nquota: {limits: {gpuEquivalents: "16"}}')
H100, L40S, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA L40S", "NVIDIA A100-SXM4-40GB"
EIGHT_GPUS = resource_slice("node-a", *(slice_device(f"gpu-{i}", H100, memory="80Gi") for i in range(8)))
HOSTILE = [
    "device.driver == 'gpu.nvidi\\x61.com'",
    "device.attributes['gpu.nvidia.com'].type == '\\147pu'",
    'device.attributes["gpu.nvidia.com"].productName != "x && device.driver == \'nic.example.com"',
    "device.driver == r'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA')",
]


def decide(engine_policy: Any, *claims: dict[str, Any], slices: tuple[dict[str, Any], ...] = (), **more: Any) -> Any:
    """The validating decision on a pod naming claim `c` of namespace ml."""
    state = cluster(*claims, slices=slices, **more)
    return engine_from(engine_policy).validate(claim_pod("c"), NoUsage(), cluster=state)


@pytest.mark.parametrize("shown", [(), (EIGHT_GPUS,)], ids=["offline", "devices-shown"])
@pytest.mark.parametrize("selector", HOSTILE, ids=["hex-escape", "octal-escape", "term-in-a-literal", "raw-string"])
def test_a_selector_spelled_to_look_like_another_driver_is_charged_the_gpus_it_reaches(selector, shown):
    """Eight GPUs under `gpus: 2`: the scheduler reads each of these as selecting NVIDIA's GPUs."""
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", 8, selector)))
    decision = decide(TWO_GPUS, made, slices=shown)
    assert not decision.allowed
    assert decision.usage.gpus == 8


def test_a_selector_that_does_not_compile_is_refused_as_the_api_server_refuses_it():
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", 1, "device.driver ==")))
    with pytest.raises(InputError) as refused:
        engine_from(BUDGET).validate(made, NoUsage(), cluster=cluster())
    assert refused.value.path == "spec.devices.requests[0].exactly.selectors[0].cel.expression"
    assert "compilation failed" in str(refused.value) and "Syntax error" in str(refused.value)


def test_a_selector_naming_a_library_this_host_lacks_narrows_nothing_and_is_not_refused():
    unread = "device.driver == 'nic.example.com' && ip('10.0.0.1').family() == 4"
    made = claim("c", "ml", claim_spec(exactly("nic.example.com", 1, unread)))
    decision = decide(BUDGET, made, slices=(EIGHT_GPUS,))
    assert decision.allowed
    assert decision.usage.gpu_equivalents == 0  # the class alone still rules GPUs out


@pytest.mark.parametrize(
    "selector, expected",
    [
        pytest.param("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L40S'", Fraction(1), id="by-product"),
        pytest.param(
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('60Gi')) >= 0",
            Fraction(1),
            id="by-capacity-a-whole-gpu",
        ),
        pytest.param(
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('6Gi')) < 0",
            Fraction(1, 7),
            id="by-capacity-only-slices",
        ),
        pytest.param(
            "device.attributes['gpu.nvidia.com'].driverVersion.isLessThan(semver('540.0.0'))",
            Fraction(1),
            id="by-version",
        ),
    ],
)
def test_with_devices_shown_a_request_is_charged_the_worst_device_its_selectors_admit(selector, expected):
    slices = (
        resource_slice(
            "node-a", slice_device("gpu-0", L40S, memory="48Gi"), slice_device("gpu-1", H100, memory="80Gi")
        ),
        resource_slice(
            "node-b", slice_device("mig-0", A100, "1g.5gb", "4864Mi"), slice_device("vfio-0", A100, kind="vfio")
        ),
    )
    slices[1]["spec"]["devices"][1]["attributes"]["driverVersion"] = {"version": "535.104.5"}
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com" if expected == 1 else "mig.nvidia.com", 1, selector)))
    state_classes = [device_class("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com'"), MIG_CLASS]
    decision = decide(BUDGET, made, slices=slices, classes=state_classes)
    assert decision.allowed, decision.message
    assert decision.usage.gpu_equivalents == expected


def test_a_gpu_the_mig_catalog_does_not_know_is_a_whole_device_beside_a_shared_one():
    """A 10Gi share is 1/8 of a shared H100, but the scheduler may hand it a whole L40S."""
    slices = (
        resource_slice("node-a", shareable(slice_device("gpu-0", H100, memory="80Gi")), slice_device("gpu-1", L40S)),
    )
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", 1, capacity={"requests": {"memory": "10Gi"}})))
    assert decide(BUDGET, made, slices=slices).usage.gpu_equivalents == 1
    alone = (resource_slice("node-a", shareable(slice_device("gpu-0", H100, memory="80Gi"))),)
    assert decide(BUDGET, made, slices=alone).usage.gpu_equivalents == Fraction(1, 8)


def test_a_mig_device_of_a_model_the_catalog_cannot_weigh_is_a_whole_gpus_worth():
    slices = (resource_slice("node-a", slice_device("mig-0", "NVIDIA Next 400GB", "1g.50gb", "50Gi")),)
    made = claim("c", "ml", claim_spec(exactly("mig.nvidia.com", 2)))
    decision = decide(BUDGET, made, slices=slices)
    assert decision.usage.gpu_equivalents == 2 and decision.usage.slices == {"1g.50gb": 2}


SERVED_H100 = device_class("h100-plugin-name", "device.driver == 'gpu.nvidia.com'", "nvidia.com/h100")


def gpu_pod(resource: str, amount: int) -> dict[str, Any]:
    return pod({"name": "main", "image": "cuda", "resources": {"limits": {resource: amount}}}, namespace="ml")


def test_an_nvidia_name_a_class_serves_is_charged_and_gated_as_what_the_class_selects():
    state = cluster(classes=[SERVED_H100], slices=(EIGHT_GPUS,))
    decision = engine_from(TWO_GPUS).validate(gpu_pod("nvidia.com/h100", 8), NoUsage(), cluster=state)
    assert not decision.allowed
    assert decision.usage.gpus == 8


@pytest.mark.parametrize(
    "resource, gpus",
    [("nvidia.com/a100", 3), ("nvidia.com/hostdev", 0), ("nvidia.com/sriov_ib_vf", 0), ("nvidia.com/mlnxnics", 0)],
    ids=["a-renamed-gpu", "network-operator-hostdev", "an-sriov-pool", "network-operator-mlnxnics"],
)
def test_an_nvidia_name_nothing_explains_is_a_whole_gpu_a_unit_but_a_nics(resource, gpus):
    decision = engine_from(BUDGET).validate(gpu_pod(resource, 3), NoUsage(), cluster=cluster())
    assert decision.allowed
    assert decision.usage.gpus == gpus


def test_a_name_the_device_plugin_and_a_class_may_both_serve_is_charged_the_worse_reading_once():
    """nvidia.com/mig-1g.10gb: a slice from the device plugin, or from a class whose devices here
    are 2g.20gb slices; one unit is never charged twice."""
    odd = device_class(
        "odd.example.com", "device.attributes['gpu.nvidia.com'].profile == '2g.20gb'", "nvidia.com/mig-1g.10gb"
    )
    slices = (resource_slice("node-a", slice_device("mig-0", H100, "2g.20gb", "20Gi")),)
    decision = engine_from(BUDGET).validate(
        gpu_pod("nvidia.com/mig-1g.10gb", 1), NoUsage(), cluster=cluster(classes=[odd], slices=slices)
    )
    assert decision.usage.gpu_equivalents == Fraction(2, 7)
    assert decision.usage.slices == {"1g.10gb": 1, "2g.20gb": 1}


ALL = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", None, allocationMode="All")))


def test_all_the_devices_a_selector_admits_are_charged_by_the_node_that_holds_the_most():
    slices = (
        resource_slice("node-a", *(slice_device(f"gpu-{i}", H100) for i in range(3))),
        resource_slice("node-b", slice_device("gpu-0", H100)),
    )
    decision = decide(BUDGET, ALL, slices=slices)
    assert decision.allowed, decision.message
    assert decision.usage.gpus == 3


def test_all_the_devices_with_none_shown_is_refused_saying_why():
    decision = decide(BUDGET, ALL)
    assert not decision.allowed
    assert "no device the cluster's ResourceSlices show bounds that here" in decision.message


SHARED_H100 = resource_slice("node-a", shareable(slice_device("gpu-0", H100, memory="80Gi")))


def allocated_claim(consumed: dict[str, str] | None) -> dict[str, Any]:
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", 1)))
    result: dict[str, Any] = {"request": "r0", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"}
    if consumed is not None:
        result["consumedCapacity"] = consumed
    made["status"] = {"allocation": {"devices": {"results": [result]}}}
    return made


@pytest.mark.parametrize(
    "consumed, expected",
    [({"memory": "20Gi"}, Fraction(1, 4)), ({"memory": "0"}, Fraction(1)), (None, Fraction(1))],
    ids=["the-share-it-consumed", "a-share-of-nothing-is-the-device", "nothing-recorded-is-the-device"],
)
def test_an_allocated_claim_is_charged_what_its_allocation_holds(consumed, expected):
    decision = decide(BUDGET, allocated_claim(consumed), slices=(SHARED_H100,))
    assert decision.usage.gpu_equivalents == expected


def nvidia_config(kind: str, **fields: Any) -> list[dict[str, Any]]:
    parameters = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": kind, **fields}
    return [{"opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}]


SHARED_WEIGHT = policy("half", 'match: {namespaces: [ml]}\nquota: {limits: {gpuEquivalents: "1"}, sharedWeight: "1/2"}')


@pytest.mark.parametrize(
    "config",
    [
        nvidia_config("GpuConfig", sharing={"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}),
        nvidia_config("GpuConfig", sharing={"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}}),
    ],
    ids=["time-slicing", "mps"],
)
def test_nvidias_sharing_configs_are_charged_as_shares_the_policy_weighs(config):
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", 2), config=config))
    decision = decide(SHARED_WEIGHT, made)
    assert decision.allowed, decision.message  # two GPUs, weighed at half: the budget of one holds
    assert decision.usage.shared_equivalents == 2 and decision.usage.gpus == 2
    assert decide(BUDGET, made).allowed  # no refusal as an opaque configuration


def test_a_passthrough_config_is_the_whole_gpu_it_passes():
    config = nvidia_config("VfioDeviceConfig", iommu={"backendPolicy": "LegacyOnly"})
    made = claim("c", "ml", claim_spec(exactly("vfio.gpu.nvidia.com", 1), config=config))
    decision = decide(BUDGET, made)
    assert decision.allowed, decision.message
    assert decision.usage.gpus == 1 and decision.usage.gpu_equivalents == 1


@pytest.mark.parametrize(
    "config",
    [
        nvidia_config("GpuConfig", sharing={"strategy": "TimeSlicing"}, extra=True),
        nvidia_config("GpuConfig", sharing={"strategy": "Magic"}),
        nvidia_config("ComputeDomainChannelConfig"),
        [{"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "everything"}}}],
    ],
    ids=["a-field-the-driver-does-not-take", "an-unknown-strategy", "another-kind", "another-driver"],
)
def test_any_other_configuration_stays_opaque_and_refused_unless_allowed(config):
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", 1), config=config))
    decision = decide(BUDGET, made)
    assert not decision.allowed and "security.draOpaqueConfig" in decision.message
    assert claim_demand(made["spec"]).opaque_config == ("spec.devices.config[0].opaque",)


def test_a_claim_pinned_to_a_profile_of_another_model_is_held_to_the_policys_models():
    models = policy("a100", "match: {namespaces: [ml]}\nmig: {gpuModels: [A100-80GB]}")
    slices = (resource_slice("node-a", slice_device("mig-0", H100, "1g.10gb", "9856Mi")),)
    made = claim("c", "ml", claim_spec(exactly("mig-1g-10gb.gpu.nvidia.com", 1)))
    state_classes = [profile_class("1g.10gb")]
    decision = decide(models, made, slices=slices, classes=state_classes)
    assert not decision.allowed
    assert "may get a 1g.10gb of H100-80GB, not a model the policy allows (A100-80GB)" in decision.message
    a100 = (resource_slice("node-a", slice_device("mig-0", "NVIDIA A100-SXM4-80GB", "1g.10gb", "9856Mi")),)
    assert decide(models, made, slices=a100, classes=state_classes).allowed


def test_devices_a_watch_read_on_its_thread_are_evaluated_on_an_admissions():
    """A slice is read on the watch's thread, a selector calling the libraries' functions (semver,
    quantity) evaluated on an admission's: the replica found cel-expr-python cannot run those
    across threads on a kept activation."""
    versioned = slice_device("gpu-0", H100, memory="80Gi")
    versioned["attributes"]["driverVersion"] = {"version": "550.54.15"}
    read: list[Any] = []
    watch = threading.Thread(target=lambda: read.append(inventory(resource_slice("node-a", versioned))))
    watch.start()
    watch.join()
    selector = compile_selector("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))")
    found = read[0].reach((selector,))
    assert found is not None and found.devices == 1


def test_a_share_of_a_device_the_catalog_cannot_weigh_is_the_whole_device():
    unknown = shareable(slice_device("mig-0", "NVIDIA Next 400GB", "1g.50gb", "50Gi"))
    made = claim("c", "ml", claim_spec(exactly("mig.nvidia.com", 1, capacity={"requests": {"memory": "10Gi"}})))
    decision = decide(BUDGET, made, slices=(resource_slice("node-a", unknown),))
    assert decision.usage.gpu_equivalents == 1


def demo_template(name: str, request: dict[str, Any], config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A ResourceClaimTemplate shaped after NVIDIA's DRA driver's demos (demo/specs/quickstart,
    consumable-shares), written here."""
    return claim(name, "gpu-test", claim_spec(request, config=config), template=True)


NVIDIA_DEMOS = [
    demo_template("single-gpu", exactly("gpu.nvidia.com")),
    demo_template(
        "shared-gpu",
        exactly("gpu.nvidia.com"),
        nvidia_config(
            "GpuConfig",
            sharing={
                "strategy": "MPS",
                "mpsConfig": {"defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "10Gi"},
            },
        ),
    ),
    demo_template(
        "time-sliced-gpu",
        exactly("gpu.nvidia.com"),
        nvidia_config("GpuConfig", sharing={"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}),
    ),
    demo_template(
        "single-gpu-full-vfioconfig",
        exactly("vfio.gpu.nvidia.com"),
        nvidia_config("VfioDeviceConfig", iommu={"backendPolicy": "LegacyOnly", "enableAPIDevice": True}),
    ),
    demo_template("gpu-4gi", exactly("gpu.nvidia.com", capacity={"requests": {"memory": "4Gi"}})),
]


@pytest.mark.parametrize("template", NVIDIA_DEMOS, ids=[t["metadata"]["name"] for t in NVIDIA_DEMOS])
def test_nvidias_demo_claims_are_admitted_under_the_bundled_default(template):
    engine = engine_from(*(text for _, text in bundled_texts()))
    decision = engine.validate(template, NoUsage(), cluster=cluster())
    assert decision.allowed, decision.message


def test_a_network_operator_pod_is_charged_no_gpu():
    nic = {
        "name": "main",
        "image": "mofed",
        "resources": {"limits": {"nvidia.com/hostdev": 1, "rdma/rdma_shared_device_a": 1}},
    }
    decision = engine_from(TWO_GPUS).validate(pod(nic, namespace="ml"), NoUsage(), cluster=cluster())
    assert decision.allowed and decision.usage.gpus == 0 and decision.usage.gpu_equivalents == 0


def test_a_device_every_node_reaches_counts_with_each_nodes_own_for_all_the_devices():
    """A slice for all nodes (network-attached devices): the scheduler may allocate its devices
    beside any one node's, so `allocationMode: All` is charged each node's plus those."""
    shared_pool = resource_slice("fabric", slice_device("gpu-f0", H100), name="fabric-slice")
    del shared_pool["spec"]["nodeName"]
    shared_pool["spec"]["allNodes"] = True
    slices = (resource_slice("node-a", slice_device("gpu-0", H100), slice_device("gpu-1", H100)), shared_pool)
    assert decide(BUDGET, ALL, slices=slices).usage.gpus == 3
