"""NVIDIA's nodes as GPU Feature Discovery and mig-manager label them (tests/fixtures/gfd-nodes.yaml:
both strategies, `+me` written `.me`, time-sliced `-SHARED`, `-MIG-INVALID`, a node being split
anew, a pre-R470 name, GB300), replayed through both ways the webhook learns a cluster: the
offline `validate --cluster-state` and the node watch. Both must see the same capacity and
memory and reach the same verdicts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.engine import Engine
from policies.judge.quota import NoUsage
from policies.model.loader import load_texts
from policies.model.policyset import PolicySet
from tests.support.builders import gpu_container, pod
from tests.support.cluster import NS, Replica
from tests.support.kube_fake import FakeKube
from webhook.cli.main import main
from webhook.cli.offline import cluster_state

NODES = Path(__file__).parents[1] / "fixtures" / "gfd-nodes.yaml"
POLICIES = """
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: single-media}
spec:
  match: {namespaces: [media]}
  mig: {strategy: single, gpuModels: [A100-80GB], defaultProfile: "1g.10gb+me"}
---
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: sized}
spec:
  match: {namespaces: [sized]}
  mig: {gpuModels: [H100-80GB]}
---
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: small-budget}
spec:
  match: {namespaces: [pinned]}
  quota: {limits: {gpuEquivalents: "0.15"}}
"""


class Offline:
    """The cluster as `validate --cluster-state` reads it from a file."""

    def __init__(self) -> None:
        _, self.cluster = cluster_state(str(NODES))
        self.engine = Engine(PolicySet(load_texts([("p.yaml", POLICIES)]).policies))

    def judge(self, obj: dict[str, Any]) -> tuple[Any, Any]:
        mutation = self.engine.mutate(obj, cluster=self.cluster)
        return mutation, self.engine.validate(mutation.object, NoUsage(), cluster=self.cluster)


class Watched:
    """The cluster as a replica's node watch sees it, through the real client."""

    def __init__(self, kube: FakeKube) -> None:
        for item in yaml.safe_load(NODES.read_text())["items"]:
            kube.store("nodes", item)
        kube.put(NS, "policies", {"p.yaml": POLICIES})
        self.replica = Replica(kube)
        self.replica.wait_ready()
        self.cluster = self.replica.holder.view

    def judge(self, obj: dict[str, Any]) -> tuple[Any, Any]:
        engine = self.replica.holder.engine
        mutation = engine.mutate(obj, cluster=self.cluster)
        return mutation, engine.validate(mutation.object, NoUsage(), cluster=self.cluster)


@pytest.fixture(params=["offline", "watched"])
def view(request) -> Iterator[Offline | Watched]:
    if request.param == "offline":
        yield Offline()
        return
    kube = FakeKube()
    kube.start()
    watched = Watched(kube)
    yield watched
    watched.replica.stop()
    kube.stop()


def in_namespace(namespace: str, product: str | None = None, **annotations: str) -> dict[str, Any]:
    obj = pod(gpu_container(), namespace=namespace, annotations=annotations or None)
    if product:
        obj["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return obj


@pytest.mark.parametrize(
    "model, profile, resource, free",
    [
        ("H100-80GB", "1g.10gb", "nvidia.com/gpu", 56),  # single strategy: nvidia.com/gpu is the slice
        ("H100-80GB", "2g.20gb", "nvidia.com/mig-2g.20gb", 8),  # not 16: the node being re-split offers nothing
        ("A100-80GB", "1g.10gb+me", "nvidia.com/gpu", 8),
        ("A100-40GB", "1g.5gb", "nvidia.com/gpu", 224 + 56),  # time-sliced replicas, and the pre-R470 node
        ("A100-80GB", None, "nvidia.com/gpu", 0),  # -MIG-INVALID offers nothing
        ("GB300-278GB", "1g.35gb", "nvidia.com/mig-1g.35gb", 28),
    ],
    ids=["single", "mixed-resplit-skipped", "plus-me-label", "shared-and-old-driver", "invalid", "gb300"],
)
def test_capacity_counts_each_node_as_its_labels_say(view, model, profile, resource, free):
    assert view.cluster.capacity.free(model, profile, resource) == free


@pytest.mark.parametrize(
    "profile, mib",
    [("1g.10gb", 9984), ("2g.20gb", 20096), ("3g.40gb", 40320)],
    ids=["single-gpu-memory", "mixed-label", "mixed-label-3g"],
)
def test_real_memory_comes_from_the_nodes_labels(view, profile, mib):
    assert view.cluster.capacity.memory_mib("H100-80GB", profile) == mib


def test_single_strategy_steers_a_media_profile_to_the_label_gfd_writes(view):
    mutation, decision = view.judge(in_namespace("media"))
    assert decision.allowed
    terms = mutation.object["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    values = terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb.me" in values and not any("+" in v for v in values)
    assert not any("will wait" in w for w in mutation.warnings)  # the node has free slices


def test_gpu_memory_is_sized_on_the_nodes_memory_label_and_free_capacity(view):
    mutation, decision = view.judge(in_namespace("sized", **{"gpu-memory": "19Gi"}))
    assert decision.allowed
    (change,) = [str(c) for c in mutation.changes if "nvidia.com/mig-" in str(c)]
    assert "nvidia.com/mig-2g.20gb" in change  # no node offers 1g.20gb slices
    assert "2g.20gb has 20096 MiB on H100-80GB (as the cluster reports it)" in change and "free capacity" in change


@pytest.mark.parametrize(
    "product, allowed",
    [
        ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb.me", True),  # a 1/7 slice, not a whole GPU
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED", True),  # a share of a 1/7 slice
        ("A100-SXM4-40GB-MIG-1g.5gb", True),  # pre-R470 name: still a 1/7 slice
        ("NVIDIA-A100-SXM4-80GB-MIG-INVALID", False),  # no known split: what it can get is a whole GPU
    ],
    ids=["plus-me", "time-sliced", "old-driver", "invalid"],
)
def test_a_pod_pinned_to_a_labelled_split_is_charged_what_that_split_gives(view, product, allowed):
    _, decision = view.judge(in_namespace("pinned", product))
    assert decision.allowed is allowed, decision.message


def test_validate_with_the_cluster_state_file_reaches_the_same_verdicts(tmp_path, capsys):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text(POLICIES)
    manifests = [
        in_namespace("pinned", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb.me"),
        in_namespace("sized", **{"gpu-memory": "19Gi"}),
    ]
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump_all(manifests))
    code = main(
        ["validate", "-f", str(tmp_path / "pods.yaml"), "--policies", str(policies), "--cluster-state", str(NODES)]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2g.20gb has 20096 MiB on H100-80GB (as the cluster reports it)" in out
