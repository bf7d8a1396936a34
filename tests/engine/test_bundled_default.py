"""The bundled default judges only what it knows: it never narrows GPU models or profiles (a
policy a user writes does), and a gpu-memory need is sized against the cluster's own models."""

from __future__ import annotations

import pytest

from policies.gpu.capacity import CapacityLedger, NodeGpus
from policies.gpu.catalog import CATALOG
from policies.judge.quota import NoUsage
from policies.review.cluster import KnownCluster
from tests.support.builders import engine_from, gpu_container, pod, policy
from tests.support.dra import labels_alone

SLICES = sorted({(model.key, profile.resource) for model in CATALOG.models for profile in model.profiles})


def named(resource: str) -> dict:
    return pod({"name": "main", "image": "vllm", "resources": {"limits": {resource: 1}}}, namespace="team")


@pytest.mark.parametrize("model, resource", SLICES, ids=[f"{m}:{r}" for m, r in SLICES])
def test_a_slice_of_any_catalog_model_passes_the_default_untouched(default_engine, model, resource):
    mutation = default_engine.mutate(named(resource))
    assert mutation.object["spec"]["containers"][0]["resources"] == {"limits": {resource: 1}}
    assert "affinity" not in mutation.object["spec"]
    decision = default_engine.validate(mutation.object, NoUsage())
    assert decision.allowed, decision.message


def test_a_policy_the_user_writes_still_narrows_the_models():
    engine = engine_from(policy("h100-only", "mig: {gpuModels: [H100-80GB]}"))
    decision = engine.validate(named("nvidia.com/mig-1g.12gb"), NoUsage())
    assert not decision.allowed
    assert "profile 1g.12gb is not a profile of H100-80GB" in decision.message


def nodes(*products: str) -> KnownCluster:
    ledger = CapacityLedger(CATALOG)
    for i, product in enumerate(products):
        ledger.set_node(NodeGpus(f"n{i}", product, {"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 1}))
    ledger.mark_synced()
    return KnownCluster(capacity=labels_alone(ledger))


def sized(engine, cluster=None, memory: str = "30Gi"):
    memory_pod = pod(gpu_container(), namespace="team", annotations={"gpu-memory": memory})
    result = engine.mutate(memory_pod, cluster=cluster) if cluster else engine.mutate(memory_pod)
    return next(iter(result.object["spec"]["containers"][0]["resources"]["limits"])), result.warnings


def test_a_memory_need_is_sized_against_the_models_the_cluster_has(default_engine):
    resource, warnings = sized(default_engine, nodes("NVIDIA-A100-SXM4-80GB"))
    assert resource == "nvidia.com/mig-3g.40gb"
    assert not warnings


def test_with_no_gpu_nodes_known_the_least_of_any_gpu_that_holds_the_need_is_taken_and_said(default_engine):
    resource, warnings = sized(default_engine)
    assert resource == "nvidia.com/mig-1g.35gb"
    assert any("sized against every MIG-capable model" in w for w in warnings), warnings


def test_the_policys_own_models_are_sized_in_its_order_whatever_the_cluster_has():
    engine = engine_from(policy("mine", "mig: {gpuModels: [H100-80GB]}"))
    resource, warnings = sized(engine, nodes("NVIDIA-A100-SXM4-80GB"))
    assert resource == "nvidia.com/mig-3g.40gb"
    assert any("no free 3g.40gb slice" in w for w in warnings), warnings
