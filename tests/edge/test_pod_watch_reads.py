"""The pod watch reads a pod again only when what it holds may have changed.

Most of a pod's events are the kubelet's status reports and the scheduler's binding: the replica
keeps a digest of what it read of each pod (policies.review.pod.pod_fingerprint) and takes the
record it has, the node put in, for an event that changed nothing else. The law: whatever the
events, the counters are those of reading every version whole.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import parse_pod
from policies.engine import COMPILED
from policies.judge import pod_reading
from policies.judge.pod_facts import facts_of, may_hold, needs_of
from policies.review.pod import STATUS_READ
from tests.support import dra
from tests.support.builders import engine_from, gpu_container, plain_container, pod, policy
from webhook.cluster.quota.counting import pod_counting
from webhook.cluster.quota.counting.pod_counting import PodCounting

BUDGET = engine_from(
    policy(
        "budget",
        "match: {namespaces: [ml], podSelector: {matchExpressions: [{key: tier, operator: Exists}]}}\n"
        "quota: {limits: {gpuEquivalents: '100'}}",
    ),
    policy("everyone", "match: {namespaces: [ml]}\nquota: {limits: {pods: 100}}"),
).policy_set
BY_CONDITION = engine_from(
    policy(
        "budget",
        "match: {namespaces: [ml], condition: \"object.status.?podIP.orValue('') != ''\"}\n"
        "quota: {limits: {gpuEquivalents: '100'}}",
    )
).policy_set


def gpu_pod(name: str, uid: str, **spec: Any) -> dict[str, Any]:
    made = pod(gpu_container(), **spec)
    made["metadata"] |= {"name": name, "uid": uid, "resourceVersion": "1", "labels": {"tier": "a"}}
    made["status"] = {"phase": "Pending"}
    return made


def counting(policy_set: Any = BUDGET) -> PodCounting:
    """Counters as a replica's watch starts them: listed first (nothing yet), then fed events."""
    made = PodCounting(lambda: policy_set)
    made.replace_all([])
    return made


def kept_record(counted: PodCounting, uid: str) -> Any:
    """The record the counters keep for the pod `uid` (None: it holds nothing)."""
    return counted._counts.pods.get(uid)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the pods the watch reads whole, in order (policies.judge.pod_reading reads them:
    a spy cannot see into it compiled, so those tests run on the engine as Python only; the
    counters' results are held on both)."""
    if COMPILED:
        pytest.skip("a spy sees no call inside the compiled engine")
    seen: list[str] = []
    real = pod_reading.read_facts

    def spy(raw: dict[str, Any], *args: Any) -> Any:
        seen.append(raw["metadata"]["name"])
        return real(raw, *args)

    monkeypatch.setattr(pod_reading, "read_facts", spy)
    return seen


def later(version: dict[str, Any], **status: Any) -> dict[str, Any]:
    """The next version of a pod: a new resourceVersion, `status` merged in."""
    made = copy.deepcopy(version)
    made["metadata"]["resourceVersion"] = str(int(made["metadata"]["resourceVersion"]) + 1)
    made["status"] |= status
    return made


def bound(version: dict[str, Any], node: str) -> dict[str, Any]:
    made = later(version, conditions=[{"type": "PodScheduled", "status": "True"}])
    made["spec"]["nodeName"] = node
    return made


def test_status_reports_and_the_binding_take_the_record_kept(reads: list[str]) -> None:
    watched = counting()
    first = gpu_pod("a", "uid-a")
    watched.observe("ADDED", first)
    on_node = bound(first, "gpu-1")
    watched.observe("MODIFIED", on_node)
    waiting = later(on_node, containerStatuses=[{"name": "main", "state": {"waiting": {"reason": "Pulling"}}}])
    watched.observe("MODIFIED", waiting)
    running = later(waiting, phase="Running", podIP="10.0.0.7")  # its phase is read: finished pods hold nothing
    watched.observe("MODIFIED", running)
    ready = later(running, containerStatuses=[{"name": "main", "ready": True}], conditions=[{"type": "Ready"}])
    watched.observe("MODIFIED", ready)
    assert reads == ["a", "a"]
    kept = kept_record(watched, "uid-a")
    assert kept is not None and kept.node == "gpu-1"
    assert kept.shape == facts_of(ready, needs_of(BUDGET)).shape


def test_a_change_to_what_it_holds_reads_it_again(reads: list[str]) -> None:
    watched = counting()
    first = gpu_pod("a", "uid-a")
    watched.observe("ADDED", first)
    finished = later(first, phase="Succeeded")
    watched.observe("MODIFIED", finished)
    assert kept_record(watched, "uid-a") is None  # finished: it holds nothing now
    relabelled = later(first)
    relabelled["metadata"]["labels"] = {}
    watched.observe("MODIFIED", relabelled)
    resized = later(first)
    resized["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2
    watched.observe("MODIFIED", resized)
    assert reads == ["a"] * 4


def test_a_pod_with_no_way_to_hold_anything_is_never_read_whole(reads: list[str]) -> None:
    watched = counting()
    plain = pod(plain_container())
    plain["metadata"] |= {"uid": "uid-p", "resourceVersion": "1"}
    plain["status"] = {"phase": "Pending"}
    watched.observe("ADDED", plain)
    watched.observe("MODIFIED", bound(plain, "cpu-1"))
    watched.replace_all([plain])
    reaching = later(plain)  # reaches a GPU by its env: judged at admission, but holds nothing to count
    reaching["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    watched.observe("MODIFIED", reaching)
    assert reads == [] and watched.tracked_pods == 0
    shared = later(plain)
    shared["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    watched.observe("MODIFIED", shared)
    assert reads == ["p"] and watched.tracked_pods == 1


def test_the_counted_pods_gauge_is_written_only_when_the_count_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[float] = []
    monkeypatch.setattr(pod_counting.TRACKED_PODS, "set", written.append)
    watched = counting()
    first = gpu_pod("a", "uid-a")
    watched.observe("ADDED", first)
    watched.observe("MODIFIED", bound(first, "gpu-1"))
    plain = pod(plain_container())
    plain["metadata"] |= {"name": "p", "uid": "uid-p", "resourceVersion": "1"}
    plain["status"] = {"phase": "Pending"}
    watched.observe("ADDED", plain)
    watched.replace_all([first, gpu_pod("b", "uid-b"), plain])
    watched.observe("DELETED", first)
    assert written == [0, 1, 2, 1]


RESOURCE_NAMES = st.sampled_from(
    ["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb",
     "nvidia.com/gpumem", "example.com/h100", "deviceclass.resource.kubernetes.io/gpu.nvidia.com"]
)  # fmt: skip
DRA_CLUSTER = dra.cluster()  # example.com/h100 served by a DeviceClass, and the classes' own names
AMOUNTS = st.sampled_from(["0", "1", "2", "100m", "1Gi", 1])
RESOURCES = st.dictionaries(st.sampled_from(["limits", "requests"]), st.dictionaries(RESOURCE_NAMES, AMOUNTS))
CONTAINERS = st.lists(
    st.builds(
        lambda resources: {"name": "c", "image": "x", **({"resources": resources} if resources else {})}, RESOURCES
    ),
    max_size=2,
)
ANNOTATIONS = st.sampled_from(
    [{}, {"team": "a"}, {"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}, {"gpu-fraction": "0.5"}, {"gpu-memory": "2000"},
     {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    containers=CONTAINERS,
    init=st.none() | CONTAINERS,
    annotations=ANNOTATIONS,
    claims=st.booleans(),
    phase=st.sampled_from(["Pending", "Running", "Succeeded"]),
)
def test_a_pod_passed_over_unread_holds_nothing_read_whole(
    containers: list[dict[str, Any]], init: list[dict[str, Any]] | None, annotations: dict[str, str], claims: bool,
    phase: str,
) -> None:  # fmt: skip
    raw: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ml", "uid": "u", "annotations": annotations},
        "spec": {"containers": containers},
        "status": {"phase": phase},
    }
    if init is not None:
        raw["spec"]["initContainers"] = init
    if claims:
        raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
    if not may_hold(raw):  # read whole in a cluster whose DeviceClasses serve extended resources
        assert facts_of(raw, needs_of(BUDGET), DRA_CLUSTER) is None


def test_what_the_cluster_or_a_condition_decides_is_read_each_time(reads: list[str]) -> None:
    claims = gpu_pod("claims", "uid-c", resourceClaims=[{"name": "gpu", "resourceClaimName": "shared"}])
    watched = counting()
    watched.observe("ADDED", claims)
    watched.observe("MODIFIED", later(claims, podIP="10.0.0.8"))  # the claim may have been made since
    by_condition = counting(BY_CONDITION)
    first = gpu_pod("condition", "uid-x")
    by_condition.observe("ADDED", first)
    by_condition.observe("MODIFIED", later(first, podIP="10.0.0.9"))  # the condition reads the status
    assert reads == ["claims", "claims", "condition", "condition"]
    assert by_condition.counted().usage(BY_CONDITION.policies[0], "ml").gpu_equivalents == 1


def test_a_deleted_pod_is_forgotten_and_read_whole_if_it_comes_back(reads: list[str]) -> None:
    watched = counting()
    first = gpu_pod("a", "uid-a")
    watched.observe("ADDED", first)
    watched.observe("DELETED", first)
    watched.observe("ADDED", first)  # a relist's replay, or a watch from an older version
    assert reads == ["a", "a"] and kept_record(watched, "uid-a") is not None


def test_a_relist_keeps_what_it_read(reads: list[str]) -> None:
    watched = counting()
    first = gpu_pod("a", "uid-a")
    watched.replace_all([first])
    watched.observe("MODIFIED", bound(first, "gpu-1"))
    assert reads == ["a"]


class ReadKeys(Mapping[str, object]):
    """A status that notes which of its fields are read."""

    def __init__(self, fields: dict[str, object]) -> None:
        self.fields, self.read = fields, set[str]()

    def __getitem__(self, key: str) -> object:
        self.read.add(key)
        return self.fields[key]

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return key in self.fields

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the whole status is read")

    def __len__(self) -> int:
        return len(self.fields)


def test_of_a_status_the_engine_reads_only_what_the_digest_keeps() -> None:
    claims = gpu_pod("claims", "uid-c", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one"}])
    status = ReadKeys(
        {
            "phase": "Running",
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "claims-gpu-x"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "main", "allocatedResources": {"nvidia.com/gpu": "1"}}],
            "podIP": "10.0.0.1",
        }
    )
    claims["status"] = status
    parse_pod(claims)
    assert status.read <= set(STATUS_READ)


# --- the law ------------------------------------------------------------------------------------

EDITS = st.sampled_from(
    [
        "status report",
        "bound",
        "rebound",
        "running",
        "finished",
        "relabelled",
        "label added",
        "resized",
        "share annotation",
        "device env",
        "deleting",
        "deleted",
    ]
)


def edited(version: dict[str, Any], edit: str) -> dict[str, Any]:
    made = later(version)
    metadata, spec, status = made["metadata"], made["spec"], made["status"]
    if edit == "status report":
        status["conditions"] = [
            {"type": "Ready", "status": "True", "lastProbeTime": made["metadata"]["resourceVersion"]}
        ]
    elif edit in ("bound", "rebound"):
        spec["nodeName"] = "gpu-1" if edit == "bound" else "gpu-2"
    elif edit == "running":
        status |= {"phase": "Running", "podIP": "10.0.0.1"}
    elif edit == "finished":
        status["phase"] = "Failed"
    elif edit == "relabelled":
        metadata["labels"] = {}
    elif edit == "label added":
        metadata["labels"] = {"tier": "b"}
    elif edit == "resized":
        spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 3}}
    elif edit == "share annotation":
        metadata["annotations"] = {"gpu-fraction": "0.5"}
        spec["containers"][0]["resources"] = {}
    elif edit == "device env":
        spec["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
        spec["containers"][0]["resources"] = {}
    elif edit == "deleting":
        metadata["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return made


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 2), EDITS), max_size=14))
def test_counters_are_those_of_reading_every_version_whole(history: list[tuple[int, str]]) -> None:
    watched = counting()
    current: dict[int, dict[str, Any]] = {}
    for index in range(3):
        current[index] = gpu_pod(f"p{index}", f"uid-{index}")
        watched.observe("ADDED", current[index])
    for index, edit in history:
        if index not in current:
            current[index] = gpu_pod(f"p{index}", f"uid-{index}")
            watched.observe("ADDED", current[index])
            continue
        if edit == "deleted":
            watched.observe("DELETED", current.pop(index))
            continue
        current[index] = edited(current[index], edit)
        watched.observe("MODIFIED", current[index])
        expected = facts_of(current[index], needs_of(BUDGET))
        kept = kept_record(watched, f"uid-{index}")
        assert (kept.shape if kept else None) == (expected.shape if expected else None)
    whole = counting()
    whole.replace_all(copy.deepcopy(list(current.values())))
    for found in BUDGET.policies:
        assert watched.counted().usage(found, "ml") == whole.counted().usage(found, "ml")
