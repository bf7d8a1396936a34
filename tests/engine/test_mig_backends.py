"""One GPU request, three back-ends: the same pod asking `nvidia.com/gpu: 1` gets its MIG slice
from the device plugin, from a DeviceClass serving `nvidia.com/mig-<profile>` (DRA extended
resources), or from a claim whose request is a `firstAvailable` ladder, as the policy's
`mig.backend` says or, under `auto`, as the cluster shows; the `mutated` record says which."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.gpu.capacity import CapacityLedger, NodeGpus
from policies.gpu.catalog import CATALOG
from policies.gpu.claims import claim_demand
from policies.gpu.device_classes import DeviceClasses, read_device_class
from policies.gpu.device_reach import NO_DEVICES
from policies.judge.claim_checks import claim_checks
from policies.judge.ledger import Ledger
from policies.planning.ladder import MAX_RUNGS, claim_name
from policies.planning.published import policy_ladders, publishes
from policies.review.cluster import KnownCluster
from tests.support.builders import engine_from, gpu_container, pod, policy
from tests.support.dra import GPU_CLASS, MIG_CLASS, allocated, dra_capacity, labels_alone, resource_slice, slice_device
from tools.mig_classes import class_name, device_classes

H100 = "NVIDIA H100 80GB HBM3"
OURS = device_classes()  # the classes we ship, one per MIG profile
NVIDIA = [GPU_CLASS, MIG_CLASS]  # NVIDIA's driver's chart
POLICY = policy("p", "mig: {gpuModels: [H100-80GB], allowedProfiles: [1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb]}")
STATIC = resource_slice("dra-static", *(slice_device(f"mig-{i}", H100, "1g.20gb", "20096Mi") for i in range(2)))
MEMORY = {"gpu-memory": "15Gi"}


def plugin_nodes(**allocatable: int) -> CapacityLedger:
    ledger = CapacityLedger(CATALOG)
    labels = {"nvidia.com/mig.strategy": "mixed"}
    resources = {f"nvidia.com/mig-{k}": v for k, v in allocatable.items()}
    ledger.set_node(NodeGpus("dp-1", "NVIDIA-H100-80GB-HBM3", resources, labels))
    ledger.mark_synced()
    return ledger


def known(capacity: Any, classes: DeviceClasses, **more: Any) -> KnownCluster:
    """A cluster of `capacity`: node labels alone (a CapacityLedger), or with DRA (a WithDra)."""
    seen = labels_alone(capacity) if isinstance(capacity, CapacityLedger) else capacity
    return KnownCluster(capacity=seen, device_classes=classes, **more)


def mutated(cluster: KnownCluster, spec: str = POLICY, annotations: dict[str, str] = MEMORY) -> Any:
    return engine_from(spec).mutate(pod(gpu_container(), annotations=annotations), cluster=cluster)


def record(result: Any) -> str:
    return str(json.loads(result.object["metadata"]["annotations"]["gpu-admission.io/mutated"])[0])


def resources(result: Any) -> dict[str, Any]:
    return dict(result.object["spec"]["containers"][0]["resources"])


def test_on_a_device_plugin_cluster_the_rewrite_is_as_before_dra():
    result = mutated(known(plugin_nodes(**{"1g.20gb": 4}), DeviceClasses.of(())))
    assert resources(result)["limits"] == {"nvidia.com/mig-1g.20gb": "1"}
    assert "backend" not in record(result)


def test_on_a_dra_cluster_our_classes_serve_the_same_name_and_no_gfd_pin_is_written():
    capacity, classes = dra_capacity(STATIC, classes=[*NVIDIA, *OURS])
    result = mutated(known(capacity, classes), policy("p", "mig: {allowedProfiles: [1g.20gb]}"))
    assert resources(result)["limits"] == {"nvidia.com/mig-1g.20gb": "1"}
    assert "backend auto: DRA extended resource" in record(result)
    assert "affinity" not in result.object["spec"] and "nodeSelector" not in result.object["spec"]


def test_on_a_mixed_cluster_the_name_lands_on_either_and_the_scheduler_picks():
    capacity, classes = dra_capacity(STATIC, classes=[*NVIDIA, *OURS], labels=plugin_nodes(**{"1g.20gb": 1}))
    result = mutated(known(capacity, classes))
    assert resources(result)["limits"] == {"nvidia.com/mig-1g.20gb": "1"}
    assert "device plugin or DRA extended resource" in record(result)


def test_where_no_class_serves_the_name_a_dra_cluster_gets_a_ladder_claim_from_a_published_template():
    capacity, classes = dra_capacity(STATIC, classes=NVIDIA)
    result = mutated(known(capacity, classes))
    spec = result.object["spec"]
    (reference,) = spec["resourceClaims"]
    assert resources(result)["claims"] == [{"name": "gpu-main"}] and "nvidia.com/gpu" not in resources(result)["limits"]
    engine = engine_from(POLICY)
    published = policy_ladders(engine.policy_set.policies[0], CATALOG, capacity)
    ladder = published[reference["resourceClaimTemplateName"]]  # the replicas published it ahead
    assert [r.name for r in ladder.rungs] == ["1g-20gb", "2g-20gb", "3g-40gb"]  # smallest that holds 15Gi first
    assert "backend auto: no node serves nvidia.com/mig-1g.20gb by name" in record(result)
    again = engine.mutate(result.object, cluster=known(capacity, classes))
    assert not again.changed  # reinvocation changes nothing
    assert jsonpatch.apply_patch(pod(gpu_container(), annotations=MEMORY), list(result.patch)) == result.object


def test_auto_takes_a_claim_where_no_slice_served_by_name_is_free_but_the_ladder_has_one():
    full = allocated("c", "ml", ("dra-static", "mig-0"), ("dra-static", "mig-1"))
    bigger = resource_slice("dra-big", slice_device("mig-9", H100, "3g.40gb", "40320Mi"))
    only_1g = [c for c in OURS if c["metadata"]["name"] == class_name("1g.20gb")]
    capacity, classes = dra_capacity(STATIC, bigger, classes=[*NVIDIA, *only_1g], claims=(full,))
    result = mutated(known(capacity, classes), policy("p", "mig: {gpuModels: [H100-80GB], allowedProfiles: [1g.20gb]}"))
    assert resources(result)["limits"] == {"nvidia.com/mig-1g.20gb": "1"}  # 1g.20gb only: nothing else may serve
    result = mutated(known(capacity, classes))
    assert "claims" in resources(result) and "DRA devices free for the ladder" in record(result)


def test_a_policy_may_name_its_back_end():
    capacity, classes = dra_capacity(STATIC, classes=[*NVIDIA, *OURS])
    spec = "mig: {gpuModels: [H100-80GB], backend: draClaim, wholeGpuFallback: true}"
    claimed = mutated(KnownCluster(), policy("p", spec))  # offline too: the back-end is the policy's
    assert "policy backend draClaim" in record(claimed) and "then a whole GPU of H100-80GB" in record(claimed)
    plugin = mutated(known(capacity, classes), policy("p", "mig: {gpuModels: [H100-80GB], backend: devicePlugin}"))
    assert "policy backend devicePlugin" in record(plugin) and "affinity" in plugin.object["spec"]  # GFD pin
    extended = mutated(KnownCluster(), policy("p", "mig: {gpuModels: [H100-80GB], backend: draExtendedResource}"))
    assert "policy backend draExtendedResource" in record(extended)


def test_a_ladder_pod_is_charged_its_worst_rung_until_allocated():
    mig = "mig: {gpuModels: [H100-80GB], backend: draClaim, wholeGpuFallback: true}"
    spec = f"{mig}\nquota: {{limits: {{gpuEquivalents: '1/2'}}}}"
    engine = engine_from(policy("p", spec))
    result = engine.mutate(pod(gpu_container(), annotations=MEMORY))
    name = result.object["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
    ladder = policy_ladders(engine.policy_set.policies[0], CATALOG, KnownCluster().capacity)[name]
    template = {("ml", True, name): claim_demand(ladder.spec(CATALOG)["spec"], "spec.spec")}
    decision = engine.validate(result.object, Ledger(), cluster=KnownCluster(claims=template, knows_claims=True))
    assert not decision.allowed and "gpuEquivalents 0 + 1 exceeds 1/2" in str(decision.verdicts[0])


def test_every_published_ladder_is_a_claim_its_policy_allows():
    engine = engine_from(POLICY)
    found = policy_ladders(engine.policy_set.policies[0], CATALOG, KnownCluster().capacity)
    assert len(found) >= 4
    classes = DeviceClasses.of(read_device_class(c) for c in NVIDIA)
    for name, ladder in found.items():
        assert len(ladder.rungs) <= MAX_RUNGS and len(name) <= 253
        demand = claim_demand(ladder.spec(CATALOG)["spec"], "spec.spec")
        assert claim_checks(demand, engine.policy_set.policies, classes, NO_DEVICES, CATALOG) == []


def test_a_partitionable_pool_offers_the_smallest_profile_that_can_still_be_carved():
    # One GPU's counters: 8 memory slices; 1g.10gb placements take 1, 1g.20gb 2 (dynamic MIG).
    pool = resource_slice(
        "dra-dyn",
        slice_device("gpu-0", H100, memory="80Gi", memory_slices="8"),
        *(slice_device(f"gpu-0-mig-1g.10gb-{i}", H100, "1g.10gb", "9984Mi", memory_slices="1") for i in range(7)),
        *(slice_device(f"gpu-0-mig-1g.20gb-{i}", H100, "1g.20gb", "20096Mi", memory_slices="2") for i in range(4)),
        counters={"memory_slices": "8"},
    )
    taken = allocated("c", "ml", *(("dra-dyn", f"gpu-0-mig-1g.10gb-{i}") for i in range(6)))
    capacity, classes = dra_capacity(pool, classes=NVIDIA, claims=(taken,))
    assert capacity.dra_free("H100-80GB", "1g.10gb") == 1
    assert capacity.dra_free("H100-80GB", "1g.20gb") == 1  # the two slices left, once
    assert capacity.dra_free("H100-80GB", None) == 0  # the whole GPU is not offered beside slices
    result = mutated(known(capacity, classes), annotations={"gpu-memory": "9Gi"})
    assert record(result).split(": ")[2].startswith("1g.10gb of H100-80GB")


def test_the_classes_we_ship_serve_each_profile_by_its_device_plugin_name_and_select_only_it():
    classes = DeviceClasses.of(read_device_class(c) for c in OURS)
    for model in CATALOG.models:
        for profile in model.profiles:
            served = classes.serving(profile.resource)
            assert served is not None and served.name == class_name(profile.name)
            assert (served.selection.type, served.selection.profile) == ("mig", profile.name)
    assert classes.collisions() == []


@pytest.mark.parametrize(
    ("container", "taken", "expected"),
    [("main", set(), "gpu-main"), ("main", {"gpu-main"}, "gpu-main-2"), ("x" * 63, set(), None)],
)
def test_the_pods_claim_name_is_a_dns_label_not_taken(container, taken, expected):
    name = claim_name(container, frozenset(taken))
    assert len(name) <= 63 and name not in taken
    assert expected is None or name == expected


def test_templates_are_published_where_a_claim_may_be_given_and_nowhere_else():
    engine = engine_from(POLICY)
    (p,) = engine.policy_set.policies
    served, _ = dra_capacity(STATIC, classes=[*NVIDIA, *OURS])
    unserved, _ = dra_capacity(STATIC, classes=NVIDIA)
    assert not publishes(p, CATALOG, served)  # every slice DRA shows is served by name: no claim under auto
    assert publishes(p, CATALOG, unserved)
    assert not publishes(p, CATALOG, KnownCluster().capacity)  # no DRA at all
    (claiming,) = engine_from(policy("p", "mig: {backend: draClaim}")).policy_set.policies
    assert publishes(claiming, CATALOG, KnownCluster().capacity)
    (plugin,) = engine_from(policy("p", "mig: {backend: devicePlugin}")).policy_set.policies
    assert not publishes(plugin, CATALOG, unserved)


H100_PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]


@settings(max_examples=60, deadline=None)
@given(
    allowed=st.sets(st.sampled_from(H100_PROFILES), min_size=1),
    need_gib=st.integers(min_value=1, max_value=80),
    whole=st.booleans(),
)
def test_a_ladder_pod_is_charged_at_least_every_rung_it_may_be_given(allowed, need_gib, whole):
    """The law: whichever rung the scheduler takes, the pod was charged no less at admission."""
    profiles = ", ".join(sorted(allowed))
    fallback = str(whole).lower()
    mig = f"gpuModels: [H100-80GB], allowedProfiles: [{profiles}], backend: draClaim, wholeGpuFallback: {fallback}"
    spec = f"mig: {{{mig}}}"
    engine = engine_from(policy("p", spec))
    result = engine.mutate(pod(gpu_container(), annotations={"gpu-memory": f"{need_gib}Gi"}))
    claims = result.object["spec"].get("resourceClaims")
    if not claims:  # no allowed slice holds the need: refused, with its reason
        assert result.problems
        return
    name = claims[0]["resourceClaimTemplateName"]
    ladder = policy_ladders(engine.policy_set.policies[0], CATALOG, KnownCluster().capacity)[name]
    assert 0 < len(ladder.rungs) <= MAX_RUNGS
    template = {("ml", True, name): claim_demand(ladder.spec(CATALOG)["spec"], "spec.spec")}
    charged = engine.validate(result.object, Ledger(), cluster=KnownCluster(claims=template, knows_claims=True)).usage
    h100 = CATALOG.model("H100-80GB")
    for rung in ladder.rungs:
        weight = 1 if rung.profile is None else h100.weight(rung.profile)
        assert charged.gpu_equivalents >= weight
        if rung.profile is not None:  # every rung holds the need, by its real memory
            assert rung.profile.real_memory_mib()[0] * 2**20 >= need_gib * 2**30


A100_80 = "NVIDIA A100-SXM4-80GB"
A100_ONLY = policy("a100", "mig: {gpuModels: [A100-80GB], allowedProfiles: [1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb]}")
BOTH_MODELS = resource_slice(
    "dra-both", slice_device("mig-a", A100_80, "1g.20gb", "19968Mi"), slice_device("mig-h", H100, "1g.20gb", "20096Mi")
)


def affinity_of(result: Any) -> list[dict[str, Any]]:
    terms = result.object["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [e for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]]


@pytest.mark.parametrize("backend", ["auto", "draExtendedResource"])
def test_where_dra_serves_the_name_on_another_model_too_a_claim_holds_the_policys_models(backend):
    """An A100-only team: our per-profile class serves 1g.20gb from A100 and H100 devices alike."""
    capacity, classes = dra_capacity(BOTH_MODELS, classes=[*NVIDIA, *OURS])
    spec = policy("a100", f"mig: {{gpuModels: [A100-80GB], allowedProfiles: [1g.20gb], backend: {backend}}}")
    result = mutated(known(capacity, classes), spec)
    assert resources(result)["claims"] == [{"name": "gpu-main"}]
    assert "DRA serves nvidia.com/mig-1g.20gb on H100-80GB too: a claim" in record(result)
    published = policy_ladders(engine_from(spec).policy_set.policies[0], CATALOG, capacity)
    template = published[result.object["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]]
    assert all(m.key == "A100-80GB" for rung in template.rungs for m in rung.models)


def test_offline_a_name_dra_serves_is_held_to_the_models_by_a_claim():
    spec = policy("a100", "mig: {gpuModels: [A100-80GB], allowedProfiles: [1g.20gb], backend: draExtendedResource}")
    result = mutated(KnownCluster(), spec)
    assert resources(result)["claims"] == [{"name": "gpu-main"}]
    assert "no DRA device is known: a claim" in record(result)


def test_on_a_mixed_cluster_the_plugins_nodes_of_other_models_are_kept_off_by_label():
    """DRA serves 1g.20gb only from A100s here, the device plugin on an H100 node: the name holds
    with a NotIn pin, which DRA nodes (no GFD label) pass."""
    a100_only = resource_slice("dra-a100", slice_device("mig-a", A100_80, "1g.20gb", "19968Mi"))
    capacity, classes = dra_capacity(a100_only, classes=[*NVIDIA, *OURS], labels=plugin_nodes(**{"1g.20gb": 1}))
    result = mutated(known(capacity, classes), A100_ONLY)
    assert resources(result)["limits"] == {"nvidia.com/mig-1g.20gb": "1"}
    (pin,) = affinity_of(result)
    assert pin["operator"] == "NotIn" and "NVIDIA-H100-80GB-HBM3" in pin["values"]
    assert not any(v.startswith("NVIDIA-A100") for v in pin["values"])
    again = engine_from(A100_ONLY).mutate(result.object, cluster=known(capacity, classes))
    assert not again.changed  # a second pass changes nothing


def test_a_pod_naming_a_slice_dra_serves_on_another_model_is_refused():
    capacity, classes = dra_capacity(BOTH_MODELS, classes=[*NVIDIA, *OURS])
    named = pod({"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/mig-1g.20gb": 1}}})
    decision = engine_from(A100_ONLY).validate(named, Ledger(), cluster=known(capacity, classes))
    assert not decision.allowed
    assert "DRA serves nvidia.com/mig-1g.20gb on H100-80GB too" in decision.message
