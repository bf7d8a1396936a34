"""The law of charging: what a pod is charged is at least what it would hold on any node its
scheduling constraints admit. Nodes here are built from the catalog's data as GPU Feature
Discovery labels them, and the constraints evaluated with Kubernetes' own selector semantics,
independently of the engine's reading of them."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.gpu import cloud
from policies.gpu.catalog import CATALOG
from policies.gpu.models import GpuModel
from policies.judge.usage import effective_gpu_requests, pod_usage
from policies.review.pod import parse_pod

PRODUCT, STRATEGY = "nvidia.com/gpu.product", "nvidia.com/mig.strategy"
HAMI = "nvidia.com/gpumem"


@dataclass(frozen=True)
class Node:
    labels: dict[str, str]
    model: GpuModel | None  # None: a label the catalog does not know, or none
    profile: str | None  # single strategy
    shared: bool


def _nodes() -> list[Node]:
    nodes: list[Node] = []
    for model in CATALOG.models:
        for product in model.product_labels:
            for suffix, shared in (("", False), ("-SHARED", True)):
                for strategy in ("none", "mixed"):
                    labels = {PRODUCT: product + suffix, STRATEGY: strategy, "zone": "a"}
                    nodes.append(Node(labels, model, None, shared))
                for profile in model.profiles:
                    label = f"{product}-MIG-{profile.name.replace('+', '.')}{suffix}"
                    nodes.append(Node({PRODUCT: label, STRATEGY: "single", "zone": "a"}, model, profile.name, shared))
    for strategy in ("none", "mixed", "single"):
        nodes.append(Node({PRODUCT: "NVIDIA-GPU-FROM-THE-FUTURE", STRATEGY: strategy, "zone": "a"}, None, None, False))
    nodes.append(Node({"zone": "a"}, None, None, False))
    return nodes + _cloud_nodes()


def _cloud_nodes() -> list[Node]:
    """Nodes as the providers label them (policies.gpu.cloud's sources): GKE pools whole or split
    into one partition, with no GFD label; EKS, AKS and CoreWeave nodes with GFD's labels beside
    the provider's, or without them; GPUs without MIG."""
    nodes: list[Node] = []
    for key, table in cloud.ACCELERATOR_LABELS.items():
        for value, keys in table.items():
            nodes.append(
                Node({key: value, "zone": "a"}, CATALOG.model(keys[0]) if len(keys) == 1 else None, None, False)
            )
            for model in map(CATALOG.model, keys):
                if key == cloud.GKE_ACCELERATOR:
                    for profile in model.profiles:
                        labels = {key: value, cloud.GKE_PARTITION: profile.name.replace("+", "."), "zone": "a"}
                        nodes.append(Node(labels, model, profile.name, False))
                    continue
                product = model.product_labels[0]
                nodes.append(Node({key: value, PRODUCT: product, STRATEGY: "mixed", "zone": "a"}, model, None, False))
                profile = model.profiles[0]
                split = {key: value, PRODUCT: f"{product}-MIG-{profile.name}", STRATEGY: "single", "zone": "a"}
                nodes.append(Node(split, model, profile.name, False))
    return nodes


NODES = _nodes()


def holds(requirement: dict[str, Any], labels: dict[str, str]) -> bool:
    """Kubernetes' node selector requirement semantics (k8s.io/component-helpers nodeaffinity)."""
    key, op, values = requirement["key"], requirement["operator"], requirement.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if key not in labels or len(values) != 1:
        return False
    try:
        have, want = int(labels[key]), int(values[0])
    except ValueError:
        return False
    return have > want if op == "Gt" else have < want


def lands_on(spec: dict[str, Any], node: Node) -> bool:
    if any(node.labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    terms = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if terms is None:
        return True
    return any(
        t.get("matchExpressions") and all(holds(r, node.labels) for r in t["matchExpressions"])
        for t in terms["nodeSelectorTerms"]
    )


def held_on(raw: dict[str, Any], node: Node) -> tuple[Fraction, Fraction, int] | None:
    """(owned GPU-equivalents, shared GPU-equivalents, whole GPUs) the pod holds on `node`;
    None where the node cannot serve one of its resources."""
    amounts = effective_gpu_requests(parse_pod(raw))
    hami = HAMI in amounts
    owned, shared, gpus = Fraction(0), Fraction(0), 0
    for name, amount in amounts.items():
        n = int(amount)
        resource = CATALOG.resource(name)
        if not resource.device:
            continue
        if resource.kind.value == "whole":
            if node.profile is not None:
                model = node.model
                assert model is not None
                weight = model.weight(model.profile(node.profile))  # type: ignore[arg-type]
                whole = 0
            else:
                weight, whole = Fraction(1), n
            gpus += whole
            is_shared = resource.shared or hami or node.shared
        else:
            if node.profile is not None or node.labels.get(STRATEGY) == "none":
                return None  # single-strategy and MIG-less nodes have no nvidia.com/mig-* resources
            if node.model is None:  # a node of a model nobody knows: any family with the profile
                weight = max(m.weight(m.profile(resource.profile)) for m in CATALOG.models_with(resource.profile))  # type: ignore[arg-type]
            else:
                profile = node.model.profile(resource.profile)  # type: ignore[arg-type]
                if profile is None:
                    return None
                weight = node.model.weight(profile)
            is_shared = resource.shared or node.shared
        if is_shared:
            shared += n * weight
        else:
            owned += n * weight
    return owned, shared, gpus


CLOUD_KEYS = [cloud.GKE_ACCELERATOR, cloud.GKE_PARTITION, cloud.KARPENTER_AWS_GPU, cloud.COREWEAVE_CLASS]
LABELS = sorted({n.labels[PRODUCT] for n in NODES if PRODUCT in n.labels})
CLOUD_VALUES = sorted({v for n in NODES for k, v in n.labels.items() if k in CLOUD_KEYS} | {"nvidia-future"})
requirement = st.fixed_dictionaries(
    {
        "key": st.sampled_from([PRODUCT, PRODUCT, STRATEGY, "zone", *CLOUD_KEYS]),
        "operator": st.sampled_from(["In", "In", "In", "NotIn", "Exists", "DoesNotExist", "Gt"]),
    }
).flatmap(
    lambda r: (
        st.just(r)
        if r["operator"] in ("Exists", "DoesNotExist")
        else st.lists(
            st.sampled_from(CLOUD_VALUES if r["key"] in CLOUD_KEYS else [*LABELS, "single", "mixed", "none", "a", "3"]),
            min_size=1,
            max_size=4,
        ).map(lambda values: {**r, "values": values[:1] if r["operator"] == "Gt" else values})
    )
)
RESOURCES = [
    "nvidia.com/gpu",
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-1g.24gb",
    "nvidia.com/mig-3g.40gb",
    "nvidia.com/mig-1g.18gb.shared",
    "nvidia.com/mig-2g.48gb",
    "nvidia.com/GA100_A100_PCIE_40GB",  # a VM's passed-through GPU
    "nvidia.com/pgpu",  # the GPU Operator's passthrough alias (Kata, confidential containers)
    "nvidia.com/GRID_T4-1Q",  # a VM's vGPU: a time-sliced share
    HAMI,
]


@st.composite
def gpu_pods(draw):
    def container(name: str, sidecar: bool = False) -> dict[str, Any]:
        limits = draw(st.dictionaries(st.sampled_from(RESOURCES), st.sampled_from(["0", "1", "2", "3"]), max_size=2))
        item: dict[str, Any] = {"name": name, "image": "cuda", "resources": {"limits": limits}}
        if sidecar:
            item["restartPolicy"] = "Always"
        return item

    spec: dict[str, Any] = {"containers": [container(f"c{i}") for i in range(draw(st.integers(1, 3)))]}
    inits = draw(st.lists(st.booleans(), max_size=2))
    if inits:
        spec["initContainers"] = [container(f"i{i}", sidecar) for i, sidecar in enumerate(inits)]
    if draw(st.booleans()):
        key = draw(st.sampled_from([PRODUCT, STRATEGY, "zone", *CLOUD_KEYS]))
        spec["nodeSelector"] = {key: draw(st.sampled_from(CLOUD_VALUES if key in CLOUD_KEYS else [*LABELS, "single"]))}
    if draw(st.booleans()):
        terms = draw(st.lists(st.lists(requirement, min_size=1, max_size=3), min_size=1, max_size=3))
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": spec}


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu_pods(), st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(1)]))
def test_the_charge_is_at_least_what_the_pod_holds_on_every_node_it_may_land_on(raw, shared_weight):
    charged = pod_usage(parse_pod(raw), CATALOG)
    for node in NODES:
        if not lands_on(raw["spec"], node):
            continue
        held = held_on(raw, node)
        if held is None:
            continue
        owned, shared, gpus = held
        assert charged.equivalents(shared_weight) >= owned + shared_weight * shared, (node.labels, charged, held)
        assert charged.gpus >= gpus, (node.labels, charged, held)
        if owned or shared:
            assert charged.pods == 1
