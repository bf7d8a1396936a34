"""Cloud GPU nodes (policies.gpu.cloud): a pod pinned by a provider's label to a GPU without MIG
is never rewritten and is told why; one pinned to a MIG-capable model is steered consistently
with its pin (GKE's own partitions on GKE); the charge reads the same labels."""

from __future__ import annotations

from fractions import Fraction

import pytest

from policies.gpu import cloud
from policies.gpu.capacity import NodeGpus
from policies.gpu.catalog import CATALOG
from policies.judge.quota import NoUsage
from policies.judge.usage import pod_usage
from policies.review.pod import parse_pod
from tests.support.builders import engine_from, gpu_container, pod, policy
from tests.support.dra import labels_alone

SLICES_BY_DEFAULT = policy("slices", "mig: {defaultProfile: 1g.10gb}")
WITHOUT_MIG = [
    (cloud.GKE_ACCELERATOR, "nvidia-l4"),
    (cloud.GKE_ACCELERATOR, "nvidia-tesla-t4"),
    (cloud.KARPENTER_AWS_GPU, "a10g"),
    (cloud.EKS_AUTO_GPU, "l40s"),
    (cloud.KARPENTER_AZURE_GPU, "T4"),
    (cloud.COREWEAVE_CLASS, "L40S"),
    (cloud.COREWEAVE_CLASS, "RTX_A6000"),
]


def pinned(key: str, value: str, **annotations: str) -> dict:
    return pod(gpu_container(), annotations=annotations or None, nodeSelector={key: value})


@pytest.mark.parametrize("key, value", WITHOUT_MIG, ids=[f"{k}={v}" for k, v in WITHOUT_MIG])
def test_a_pod_pinned_to_a_gpu_without_mig_is_never_rewritten_and_is_told_why(key, value):
    result = engine_from(SLICES_BY_DEFAULT).mutate(pinned(key, value))
    assert result.object["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert "affinity" not in result.object["spec"]
    assert any(f"pinned to {value} ({key}), a GPU without MIG" in w for w in result.warnings), result.warnings


def test_the_same_pod_in_an_affinity_term_with_an_unpinned_term_is_rewritten():
    terms = [
        {"matchExpressions": [{"key": cloud.GKE_ACCELERATOR, "operator": "In", "values": ["nvidia-l4"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
    ]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    result = engine_from(SLICES_BY_DEFAULT).mutate(pod(gpu_container(), affinity=affinity))
    assert "nvidia.com/mig-1g.10gb" in result.object["spec"]["containers"][0]["resources"]["limits"]


def test_a_pod_pinned_to_a_gke_mig_model_gets_gke_partitions_of_that_model():
    engine = engine_from(policy("p", "mig: {}"))
    result = engine.mutate(pinned(cloud.GKE_ACCELERATOR, "nvidia-a100-80gb", **{"gpu-memory": "15Gi"}))
    spec = result.object["spec"]
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert spec["nodeSelector"] == {cloud.GKE_ACCELERATOR: "nvidia-a100-80gb", cloud.GKE_PARTITION: "1g.20gb"}
    assert "affinity" not in spec
    usage = pod_usage(parse_pod(result.object), CATALOG)
    assert usage.equivalents(Fraction(1)) == Fraction(1, 7) and usage.gpus == 0


@pytest.mark.parametrize(
    "key, value, resource, products",
    [
        (cloud.KARPENTER_AWS_GPU, "h100", "nvidia.com/mig-1g.20gb", "NVIDIA-H100-80GB-HBM3"),
        (cloud.COREWEAVE_CLASS, "A100_NVLINK_80GB", "nvidia.com/mig-1g.20gb", "NVIDIA-A100-SXM4-80GB"),
    ],
    ids=["karpenter-h100", "coreweave-a100-80gb"],
)
def test_a_pod_pinned_to_a_mig_model_elsewhere_is_sized_and_pinned_on_that_model(key, value, resource, products):
    result = engine_from(policy("p", "mig: {}")).mutate(pinned(key, value, **{"gpu-memory": "15Gi"}))
    spec = result.object["spec"]
    assert resource in spec["containers"][0]["resources"]["limits"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert products in terms[0]["matchExpressions"][0]["values"]


def test_a_pin_outside_the_policys_models_is_denied_with_both_named():
    engine = engine_from(policy("h100s", "mig: {gpuModels: [H100-80GB], defaultProfile: 1g.10gb}"))
    decision = engine.validate(pinned(cloud.GKE_ACCELERATOR, "nvidia-a100-80gb"), NoUsage())
    assert not decision.allowed
    assert "pinned to A100-80GB nodes, which this policy's models (H100-80GB) do not include" in decision.message


def test_a_pod_already_on_a_gke_partition_is_left_as_it_is_and_charged_the_partition():
    raw = pinned(cloud.GKE_PARTITION, "3g.40gb")
    result = engine_from(SLICES_BY_DEFAULT).mutate(raw)
    assert result.object["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert any("GKE's 3g.40gb partitions" in w for w in result.warnings), result.warnings
    usage = pod_usage(parse_pod(raw), CATALOG)
    assert usage.equivalents(Fraction(1)) == Fraction(3, 7) and usage.gpus == 0


@pytest.mark.parametrize(
    "key, value",
    [
        (cloud.GKE_ACCELERATOR, "nvidia-l4"),
        (cloud.GKE_ACCELERATOR, "nvidia-a100-80gb"),
        (cloud.KARPENTER_AWS_GPU, "a100"),
    ],
    ids=["l4", "gke-a100-unsplit", "karpenter-a100"],
)
def test_a_whole_gpu_on_an_accelerator_pin_is_charged_a_whole_gpu(key, value):
    usage = pod_usage(parse_pod(pinned(key, value)), CATALOG)
    assert usage.equivalents(Fraction(1)) == 1 and usage.gpus == 1


def test_every_value_names_catalog_models_or_none():
    for table in cloud.ACCELERATOR_LABELS.values():
        for models in table.values():
            assert all(CATALOG.has_model(m) for m in models)


def test_free_gke_partitions_steer_the_choice_and_count_as_capacity():
    from policies.gpu.capacity import CapacityLedger
    from policies.review.cluster import KnownCluster

    ledger = CapacityLedger(CATALOG)
    labels = {cloud.GKE_ACCELERATOR: "nvidia-a100-80gb", cloud.GKE_PARTITION: "2g.20gb"}
    ledger.set_node(NodeGpus("gke-a100-2g", None, {"nvidia.com/gpu": 3}, labels))
    ledger.mark_synced()
    assert ledger.free("A100-80GB", "2g.20gb", "nvidia.com/gpu") == 3
    engine = engine_from(policy("p", "mig: {}"))
    asking = pinned(cloud.GKE_ACCELERATOR, "nvidia-a100-80gb", **{"gpu-memory": "15Gi"})
    result = engine.mutate(asking, cluster=KnownCluster(capacity=labels_alone(ledger)))
    assert result.object["spec"]["nodeSelector"][cloud.GKE_PARTITION] == "2g.20gb"  # 1g.20gb: none free
    assert result.object["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
