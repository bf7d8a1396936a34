"""Subresources that change what a GPU workload runs, over real HTTPS as the API server sends them.

`kubectl scale` and autoscalers: a workload's Scale subresource carries a count, no template, so a
scale-up is judged by the workload the webhook reads, for the pods it adds. `pods/resize`: a pod's
CPU and memory changed in place is judged as it is left. Before, neither reached the webhook: a
Deployment within its budget at apply could be scaled past it, and a pod resized past a rule,
without a word."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.builders import engine_from, gpu_container, pod, policy
from tests.support.server_harness import ApiServer, admission_review, api_server, holder_of, scale_review
from webhook.cluster.live import ClusterLink

POLICIES = [
    policy("four-gpus", "match: {namespaces: [team]}\nquota: {limits: {gpus: 4}}"),
    policy("told", "match: {namespaces: [loose]}\nquota: {action: warn, limits: {gpus: 4}}"),
    policy(
        "memory-per-gpu-pod",
        "match: {namespaces: [sized]}\nrules:\n  - name: at-most-64gi\n"
        "    expression: \"object.spec.containers.all(c, !has(c.resources.limits) || !('memory' in c.resources.limits)"
        " || quantity(c.resources.limits['memory']).compareTo(quantity('64Gi')) <= 0)\"\n"
        "    message: a GPU pod's containers may hold at most 64Gi of memory\n",
    ),
]


def deployment(namespace: str, replicas: int, gpus: int = 1) -> dict[str, Any]:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve", "namespace": namespace},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [container]}}},
    }


def leader_worker_set(namespace: str, replicas: int, size: int) -> dict[str, Any]:
    worker = {"spec": {"containers": [gpu_container(gpus=1)]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm", "namespace": namespace},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": worker}},
    }


@pytest.fixture
def api(tmp_path):
    workloads = {
        ("apps", "deployments", "team", "serve"): deployment("team", 2),
        ("apps", "deployments", "loose", "serve"): deployment("loose", 2),
        ("apps", "deployments", "team", "web"): {**deployment("team", 1), "spec": {"replicas": 1, "template": {
            "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}},
        ("leaderworkerset.x-k8s.io", "leaderworkersets", "team", "llm"): leader_worker_set("team", 1, 2),
    }  # fmt: skip
    link = ClusterLink(read_workload=lambda group, version, plural, ns, name: workloads.get((group, plural, ns, name)))
    holder = holder_of(engine_from(*POLICIES), link)
    with api_server(holder, tmp_path) as server:
        for namespace in ("team", "loose"):  # the Deployment's two running pods, charged
            for i in range(2):
                running = pod(f"serve-{i}", namespace=namespace, containers=[gpu_container()])
                running["metadata"]["uid"] = f"{namespace}-serve-{i}"
                allowed, _, _ = server.create(running)
                assert allowed
        yield server


def scale(api: ApiServer, plural: str, namespace: str, name: str, was: int, now: int, **options: Any) -> Any:
    status, body = api.client.review("/validate", scale_review(plural, namespace, name, was, now, **options))
    assert status == 200
    return body["response"]


def test_a_scale_up_past_the_budget_is_denied_counting_only_the_pods_it_adds(api):
    response = scale(api, "deployments", "team", "serve", 2, 6)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "Deployment team/serve spec.template" in message
    assert "scaling from 2 to 6 adds 4 pods, gpus 2 + 4x1 = 6, over 4 (policy four-gpus)" in message


def test_a_scale_up_the_budget_holds_passes(api):
    assert scale(api, "deployments", "team", "serve", 2, 4)["allowed"] is True


def test_a_scale_down_is_never_judged(api):
    assert scale(api, "deployments", "team", "serve", 6, 2)["allowed"] is True


def test_a_policy_that_warns_warns_at_scale_time(api):
    response = scale(api, "deployments", "loose", "serve", 2, 6)
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert "scaling from 2 to 6 adds 4 pods, gpus 2 + 4x1 = 6, over 4 (policy told)" in warning


def test_a_workload_without_gpus_scales_freely(api):
    assert scale(api, "deployments", "team", "web", 1, 50)["allowed"] is True


def test_a_leader_worker_set_adds_size_pods_a_group(api):
    response = scale(api, "leaderworkersets", "team", "llm", 1, 2, group="leaderworkerset.x-k8s.io")
    assert response["allowed"] is True  # 2 + 2 of 4
    response = scale(api, "leaderworkersets", "team", "llm", 1, 3, group="leaderworkerset.x-k8s.io")
    assert response["allowed"] is False
    assert "adds 4 pods, gpus 2 + 4x1 = 6, over 4" in response["status"]["message"]


def test_a_workload_that_cannot_be_read_passes_and_says_so(api):
    response = scale(api, "deployments", "team", "gone", 1, 8)
    assert response["allowed"] is True
    assert response["warnings"] == ["gpu-admission: deployments team/gone could not be read; scale not judged"]


def test_a_pod_resized_in_place_is_judged_as_it_is_left(api):
    old = pod("infer", namespace="sized", containers=[gpu_container()])
    old["spec"]["containers"][0]["resources"]["limits"]["memory"] = "32Gi"
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["resources"]["limits"]["memory"] = "128Gi"
    allowed, response = api.update(old, new, sub_resource="resize")
    assert not allowed
    assert "a GPU pod's containers may hold at most 64Gi of memory" in response["status"]["message"]
    new["spec"]["containers"][0]["resources"]["limits"]["memory"] = "48Gi"
    assert api.update(old, new, sub_resource="resize")[0]


def update(api: ApiServer, old: dict[str, Any], new: dict[str, Any]) -> Any:
    status, body = api.client.review("/validate", admission_review(new, operation="UPDATE", old=old))
    assert status == 200
    return body["response"]


def test_an_update_counts_the_replicas_running_once(api):
    """The same as `kubectl scale`, by apply: re-applying an unchanged Deployment or labelling it
    warns of nothing; 2 -> 6 replicas counts 4 more on top of the 2 running, not 6 (#41)."""
    running = deployment("team", 2)
    labelled = copy.deepcopy(running)
    labelled["metadata"]["labels"] = {"tier": "gold"}
    assert update(api, running, running).get("warnings") is None
    assert update(api, running, labelled).get("warnings") is None
    (warning,) = update(api, running, deployment("team", 6))["warnings"]
    assert "6 replicas (from 2) would hold gpus 2 + 4x1 = 6, over 4 (policy four-gpus)" in warning
    warnings = update(api, running, deployment("team", 3, gpus=2))["warnings"]
    assert any("3 replicas (from 2) would hold gpus 2 - 2 + 3x2 = 6, over 4" in w for w in warnings)
