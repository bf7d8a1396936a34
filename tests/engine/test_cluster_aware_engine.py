"""The engine with what it may know of the cluster: namespace labels for namespaceSelector,
free GPU capacity for the choice among allowed models and profiles, namespaced policies, and
`validate --cluster-state` reading Namespaces and Nodes beside Pods."""

from __future__ import annotations

import json

import pytest
import yaml

from policies.gpu.capacity import CapacityLedger, NodeGpus
from policies.gpu.catalog import CATALOG
from policies.gpu.dra_inventory import WithDra
from policies.model.loader import load_texts
from policies.model.policy import Consistency
from policies.model.policyset import PolicySet
from policies.review.cluster import KnownCluster
from tests.support.builders import engine_from, gpu_container, pod, policy
from tests.support.dra import labels_alone
from webhook.cli.main import main

SELECTED = policy("gold", "match: {namespaceSelector: {matchLabels: {tier: gold}}}")
BY_NAME = policy(
    "by-name",
    "match: {namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [ml]}]}}",
)


@pytest.mark.parametrize(
    "labels, expected",
    [({"tier": "gold"}, ["by-name", "gold"]), ({"tier": "silver"}, ["by-name"]), (None, ["by-name"])],
    ids=["gold-namespace", "silver-namespace", "labels-unknown"],
)
def test_namespace_selector_matches_the_namespace_labels_and_knows_the_name_label_without_them(labels, expected):
    policy_set = engine_from(SELECTED, BY_NAME).policy_set
    assert [p.name for p in policy_set.matching("ml", {}, None, labels).policies] == expected


def capacity(**free: int) -> WithDra:
    """A cluster with one node per (model, profile) given as model__profile=count."""
    ledger = CapacityLedger(CATALOG)
    for i, (slot, count) in enumerate(free.items()):
        model, profile = slot.split("__")
        product = CATALOG.model(model.replace("_", "-")).product_labels[0]
        ledger.set_node(NodeGpus(f"n{i}", product, {f"nvidia.com/mig-{profile.replace('_', '.')}": count}))
    ledger.mark_synced()
    return labels_alone(ledger)


MODELS = policy("p", "mig: {gpuModels: [H100-80GB, A100-40GB]}")


def rewritten(engine, cluster, annotations):
    result = engine.mutate(pod(gpu_container(), annotations=annotations), cluster=cluster)
    limits = result.object["spec"]["containers"][0]["resources"]["limits"]
    return next(iter(limits)), result


@pytest.mark.parametrize(
    "free, profile, said",
    [
        ({"H100_80GB__1g_20gb": 1}, "nvidia.com/mig-1g.20gb", None),
        ({"H100_80GB__1g_20gb": 0, "A100_40GB__3g_20gb": 2}, "nvidia.com/mig-3g.20gb", "free capacity on A100-40GB"),
        ({"H100_80GB__2g_20gb": 1, "A100_40GB__4g_20gb": 1}, "nvidia.com/mig-2g.20gb", "free capacity on H100-80GB"),
    ],
    ids=["preferred-fits", "other-model-right-size", "bigger-slice-on-preferred-model"],
)
def test_the_first_option_with_free_capacity_is_taken_right_size_before_bigger(free, profile, said):
    resource, result = rewritten(engine_from(MODELS), KnownCluster(capacity=capacity(**free)), {"gpu-memory": "15Gi"})
    assert resource == profile
    record = json.loads(result.object["metadata"]["annotations"]["gpu-admission.io/mutated"])[0]
    assert (said in record) if said else ("free capacity" not in record)


def test_with_no_free_capacity_anywhere_the_best_option_is_taken_and_the_user_told_it_will_wait():
    cluster = KnownCluster(capacity=capacity(H100_80GB__7g_80gb=0))
    resource, result = rewritten(engine_from(MODELS), cluster, {"gpu-memory": "15Gi"})
    assert resource == "nvidia.com/mig-1g.20gb"
    assert "main: no free 1g.20gb slice in the cluster now; the pod will wait" in result.warnings


def test_single_strategy_steers_only_to_the_models_with_free_slices_of_the_profile():
    engine = engine_from(
        policy("s", "mig: {strategy: single, gpuModels: [A100-80GB, H100-80GB], defaultProfile: 1g.10gb}")
    )
    ledger = CapacityLedger(CATALOG)
    ledger.set_node(NodeGpus("h", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", {"nvidia.com/gpu": 7}))
    ledger.mark_synced()
    result = engine.mutate(pod(gpu_container()), cluster=KnownCluster(capacity=labels_alone(ledger)))
    terms = result.object["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    values = terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    names = ("H100-80GB-HBM3", "H100-PCIe", "H800", "H800-PCIe")
    exclusive = [f"NVIDIA-{name}-MIG-1g.10gb" for name in names] + [f"{name}-MIG-1g.10gb" for name in names]
    assert values == exclusive + [f"{label}-SHARED" for label in exclusive]  # time-sliced nodes too


def test_capacity_follows_nodes_and_the_pods_bound_to_them():
    ledger = CapacityLedger(CATALOG)
    ledger.set_node(NodeGpus("a", "NVIDIA-A100-SXM4-80GB", {"nvidia.com/mig-1g.10gb": 7, "nvidia.com/gpu": 1}))
    ledger.use("a", [("nvidia.com/mig-1g.10gb", 3)])
    ledger.use("b", [("nvidia.com/mig-1g.10gb", 5)])  # a node not seen yet
    slice_, whole = ("A100-80GB", "1g.10gb", "nvidia.com/mig-1g.10gb"), ("A100-80GB", None, "nvidia.com/gpu")
    assert ledger.free(*slice_) == 4 and ledger.free(*whole) == 1
    ledger.set_node(NodeGpus("b", "NVIDIA-A100-80GB-PCIe", {"nvidia.com/mig-1g.10gb": 7}))
    assert ledger.free(*slice_) == 6
    ledger.use("a", [("nvidia.com/mig-1g.10gb", 3)], -1)
    ledger.remove_node("b")
    assert ledger.free(*slice_) == 7
    ledger.set_node(NodeGpus("s", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", {"nvidia.com/gpu": 7}))
    assert ledger.free(*slice_) == 7 and ledger.free("A100-80GB", "1g.10gb", "nvidia.com/gpu") == 7


def load(text: str, namespace: str | None = None):
    return load_texts([("p.yaml", text)], namespace=namespace)


def test_a_namespaced_policy_is_named_after_its_namespace_and_matches_only_it():
    loaded = load(policy("limits", "quota: {limits: {pods: 2}}"), namespace="team-b")
    assert not loaded.problems
    (found,) = loaded.policies
    assert found.name == "team-b/limits" and found.namespace == "team-b" and found.match.namespaces == ("team-b",)


def test_a_namespaced_policy_naming_other_namespaces_is_a_lint_error():
    loaded = load(policy("limits", "match: {namespaces: [team-b, prod]}"), namespace="team-b")
    assert "policy team-b/limits: spec.match.namespaces: a policy in namespace team-b may match only team-b" in str(
        loaded.problems[0]
    )


def test_cluster_policies_come_before_namespaced_ones_whatever_their_priority():
    cluster = load(policy("cluster", "priority: -5")).policies
    namespaced = load(policy("mine", "priority: 100"), namespace="ml").policies
    assert [p.name for p in PolicySet(cluster + namespaced).policies] == ["cluster", "ml/mine"]


@pytest.mark.parametrize(
    "written, expected",
    [("", Consistency.STRICT), ("consistency: local", Consistency.LOCAL)],
    ids=["default", "local"],
)
def test_quota_consistency_is_strict_unless_local_is_asked(written, expected):
    loaded = load(policy("q", f"quota: {{limits: {{pods: 1}}{', ' + written if written else ''}}}"))
    assert loaded.policies[0].quota.consistency is expected


def test_an_unknown_consistency_is_a_lint_error():
    assert "spec.quota.consistency: must be one of: strict, local" in str(
        load(policy("q", "quota: {limits: {pods: 1}, consistency: eventual}")).problems[0]
    )


def test_validate_reads_namespaces_and_nodes_from_the_cluster_state(tmp_path, capsys):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text(
        SELECTED.replace("spec:\n", "spec:\n  rules: [{name: never, expression: 'false', message: not in gold}]\n")
        + "---\n"
        + MODELS
    )
    state = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"tier": "gold"}}},
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "a", "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}},
            "status": {"allocatable": {"nvidia.com/mig-3g.20gb": "2"}},
        },
    ]
    (tmp_path / "state.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": state}))
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod(gpu_container(), annotations={"gpu-memory": "15Gi"})))
    code = main(
        ["validate", "-f", str(tmp_path / "pod.yaml"), "--policies", str(policies)]
        + ["--cluster-state", str(tmp_path / "state.yaml")]
    )
    out = capsys.readouterr().out
    assert code == 1 and "deny: not in gold (policy gold)" in out
    said = "gpu-memory 15Gi, 3g.20gb has 19968 MiB on A100-40GB (observed by NVIDIA); free capacity on A100-40GB"
    assert f"nvidia.com/gpu -> nvidia.com/mig-3g.20gb ({said})" in out


@pytest.mark.parametrize(
    "strategy, warned",
    [("mixed", True), ("single", False)],
    ids=["mixed-slices-escape-the-gpu-quota", "single-keeps-nvidia-gpu"],
)
def test_a_whole_gpu_resourcequota_the_rewrite_sidesteps_is_warned_about(strategy, warned):
    engine = engine_from(policy("p", f"mig: {{strategy: {strategy}, gpuModels: [A100-80GB], defaultProfile: 1g.10gb}}"))
    cluster = KnownCluster(quotas={"ml": ("gpus",)})
    warnings = engine.mutate(pod(gpu_container()), cluster=cluster).warnings
    expected = "ResourceQuota gpus counts requests.nvidia.com/gpu, not this pod's nvidia.com/mig-1g.10gb"
    assert (expected in warnings) is warned
