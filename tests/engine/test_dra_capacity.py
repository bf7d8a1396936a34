"""Free capacity from DRA: NVIDIA's devices in ResourceSlices, minus what claims' allocations hold,
offered to the resource names DeviceClasses serve; on a DRA-only cluster (no GFD label anywhere)
the choice among models and profiles is no longer blind, and in a partitionable pool a whole GPU
with a slice carved from it is not offered twice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.gpu.capacity import CapacityLedger, NoCapacity, NodeGpus
from policies.gpu.catalog import CATALOG
from policies.gpu.device_classes import DeviceClasses, read_device_class
from policies.gpu.dra_inventory import DraInventory, WithDra, read_taint_rule
from policies.review.cluster import KnownCluster
from tests.support.builders import engine_from, gpu_container, pod, policy
from tests.support.dra import GPU_CLASS, NIC_CLASS, allocated, inventory, profile_class, resource_slice, slice_device

H100 = "NVIDIA H100 80GB HBM3"
A100_40 = "NVIDIA A100-SXM4-40GB"


def with_dra(found: DraInventory, *classes: dict[str, Any]) -> WithDra:
    known = DeviceClasses.of(read_device_class(c) for c in classes)
    return WithDra(NoCapacity(), found, lambda: known)


WHOLE = resource_slice("dra-1", slice_device("gpu-0", H100), slice_device("gpu-1", H100))


def test_whole_gpus_in_slices_are_free_capacity_for_the_name_nvidias_class_serves_until_allocated():
    capacity = with_dra(inventory(WHOLE), GPU_CLASS)
    assert capacity.known and capacity.has_model("H100-80GB")
    assert capacity.free("H100-80GB", None, "nvidia.com/gpu") == 2
    taken = with_dra(inventory(WHOLE, claims=(allocated("c", "ml", ("dra-1", "gpu-0")),)), GPU_CLASS)
    assert taken.free("H100-80GB", None, "nvidia.com/gpu") == 1


def test_devices_no_class_serves_by_that_name_are_not_offered_to_it():
    assert with_dra(inventory(WHOLE), NIC_CLASS).free("H100-80GB", None, "nvidia.com/gpu") == 0
    slices = resource_slice("dra-1", slice_device("mig-0", H100, "1g.10gb"))
    served = with_dra(inventory(slices), profile_class("2g.20gb"))
    assert served.free("H100-80GB", "1g.10gb", "nvidia.com/mig-1g.10gb") == 0


# A partitionable pool (Kubernetes 1.36 on): one GPU's counters, the whole GPU and its 1g.10gb
# placements each consuming their share.
PARTITIONABLE = resource_slice(
    "dra-2",
    slice_device("gpu-0", H100, memory="80Gi", memory_slices="8"),
    *(slice_device(f"gpu-0-mig-1g10gb-{i}", H100, "1g.10gb", "9856Mi", memory_slices="1") for i in range(7)),
    counters={"memory_slices": "8"},
)


def test_in_a_partitionable_pool_a_whole_gpu_with_a_slice_carved_from_it_is_not_offered():
    classes = (GPU_CLASS, profile_class("1g.10gb"))
    fresh = with_dra(inventory(PARTITIONABLE), *classes)
    assert fresh.free("H100-80GB", None, "nvidia.com/gpu") == 1
    assert fresh.free("H100-80GB", "1g.10gb", "nvidia.com/mig-1g.10gb") == 7
    assert fresh.memory_mib("H100-80GB", "1g.10gb") == 9856
    one_slice = allocated("c", "ml", ("dra-2", "gpu-0-mig-1g10gb-3"))
    carved = with_dra(inventory(PARTITIONABLE, claims=(one_slice,)), *classes)
    assert carved.free("H100-80GB", None, "nvidia.com/gpu") == 0
    assert carved.free("H100-80GB", "1g.10gb", "nvidia.com/mig-1g.10gb") == 6
    whole = with_dra(inventory(PARTITIONABLE, claims=(allocated("c", "ml", ("dra-2", "gpu-0")),)), *classes)
    assert whole.free("H100-80GB", "1g.10gb", "nvidia.com/mig-1g.10gb") == 0


@pytest.mark.parametrize(
    "slices",
    [
        [resource_slice("dra-1", slice_device("gpu-0", H100), driver="nic.example.com")],
        [resource_slice("dra-1", slice_device("gpu-0", "Some Unknown GPU"))],
        [resource_slice("dra-1", slice_device("gpu-0", H100), generation=1), resource_slice("dra-1", generation=2)],
    ],
    ids=["another-drivers-slice", "a-model-the-catalog-does-not-know", "a-pool-replaced-by-a-newer-generation"],
)
def test_what_the_inventory_cannot_weigh_or_no_longer_holds_is_not_offered(slices):
    assert with_dra(inventory(*slices), GPU_CLASS).free("H100-80GB", None, "nvidia.com/gpu") == 0


MODELS = policy("p", "mig: {gpuModels: [H100-80GB, A100-40GB]}")


def rewritten(cluster: KnownCluster) -> tuple[str, str]:
    result = engine_from(MODELS).mutate(pod(gpu_container(), annotations={"gpu-memory": "15Gi"}), cluster=cluster)
    limits = result.object["spec"]["containers"][0]["resources"]["limits"]
    return next(iter(limits)), json.loads(result.object["metadata"]["annotations"]["gpu-admission.io/mutated"])[0]


def test_on_a_dra_only_cluster_the_rewrite_takes_the_profile_that_can_be_placed_now():
    blind, _ = rewritten(KnownCluster())
    assert blind == "nvidia.com/mig-1g.20gb"  # the policy's first model, capacity unknown
    slices = resource_slice("dra-a100", *(slice_device(f"mig-{i}", A100_40, "3g.20gb") for i in range(2)))
    classes = DeviceClasses.of(read_device_class(c) for c in (profile_class("1g.20gb"), profile_class("3g.20gb")))
    seen = WithDra(CapacityLedger(CATALOG), inventory(slices), lambda: classes)
    resource, record = rewritten(KnownCluster(capacity=seen, device_classes=classes))
    assert resource == "nvidia.com/mig-3g.20gb" and "free capacity on A100-40GB" in record


def plugin_node(name: str, gpus: int) -> CapacityLedger:
    """A node whose device plugin advertises `gpus` whole H100s (GFD labels it)."""
    ledger = CapacityLedger(CATALOG)
    ledger.set_node(NodeGpus(name, "NVIDIA-H100-80GB-HBM3", {"nvidia.com/gpu": gpus}, {}))
    ledger.mark_synced()
    return ledger


def test_a_node_whose_gpus_both_the_plugin_and_dra_advertise_is_counted_once():
    """NVIDIA's AI cluster recipes, KAI and Dynamo report it: the same GPUs in allocatable and in slices."""
    both = WithDra(
        plugin_node("gpu-1", 2), inventory(resource_slice("gpu-1", *WHOLE["spec"]["devices"])), lambda: CLASSES
    )
    assert both.dual_advertised() == frozenset({"gpu-1"})
    assert both.free("H100-80GB", None, "nvidia.com/gpu") == 2  # not 4
    apart = WithDra(
        plugin_node("gpu-2", 2), inventory(resource_slice("gpu-1", *WHOLE["spec"]["devices"])), lambda: CLASSES
    )
    assert apart.dual_advertised() == frozenset()
    assert apart.free("H100-80GB", None, "nvidia.com/gpu") == 4  # two nodes, each served one way


CLASSES = DeviceClasses.of([read_device_class(GPU_CLASS)])
TAINTED = resource_slice(
    "dra-1", {**slice_device("gpu-0", H100), "taints": [{"key": "broken", "effect": "NoSchedule"}]}
)


def test_a_tainted_device_is_no_free_capacity():
    assert with_dra(inventory(TAINTED), GPU_CLASS).free("H100-80GB", None, "nvidia.com/gpu") == 0
    found = inventory(WHOLE)
    found.held.set_taint_rule("drain-gpu-0", read_taint_rule(TAINT_RULE))
    assert with_dra(found, GPU_CLASS).free("H100-80GB", None, "nvidia.com/gpu") == 1
    found.held.set_taint_rule("drain-gpu-0", None)
    assert with_dra(found, GPU_CLASS).free("H100-80GB", None, "nvidia.com/gpu") == 2


TAINT_RULE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "drain-gpu-0"},
    "spec": {
        "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "dra-1", "device": "gpu-0"},
        "taint": {"key": "maintenance", "effect": "NoExecute"},
    },
}


def test_a_taint_that_keeps_nothing_off_leaves_the_device_free():
    soft = {**TAINT_RULE, "spec": {**TAINT_RULE["spec"], "taint": {"key": "note", "effect": "None"}}}
    assert read_taint_rule(soft) is None


@pytest.mark.parametrize("setting", ["avoid", "warn", "allow"])
def test_a_policy_keeps_gpu_pods_off_dual_advertised_nodes_or_warns(setting):
    both = WithDra(
        plugin_node("gpu-1", 2), inventory(resource_slice("gpu-1", *WHOLE["spec"]["devices"])), lambda: CLASSES
    )
    spec = policy("p", f"mig: {{dualAdvertisedNodes: {setting}}}")
    result = engine_from(spec).mutate(pod(gpu_container()), cluster=KnownCluster(capacity=both, device_classes=CLASSES))
    affinity = result.object["spec"].get("affinity")
    if setting == "avoid":
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-1"]}]}
        ]
        again = engine_from(spec).mutate(result.object, cluster=KnownCluster(capacity=both, device_classes=CLASSES))
        assert not again.changed
    else:
        assert affinity is None
    warned = any("whose GPUs both the device plugin and the DRA driver advertise" in w for w in result.warnings)
    assert warned is (setting == "warn")
