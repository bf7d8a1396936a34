"""Native runtime settings (policies.native.runtime_map): the matching policies' `runtime` sections
as a MutatingAdmissionPolicy the API server applies before the mutating webhook. Applied here
with the engine's CEL (tests.support.native.mutated) beside the engine's own mutation; the real
API server applies it in tests/e2e/test_native_runtime.py.

The law: the webhook after the native object leaves every pod as the webhook alone does (its
record's entries in another order at most), with the same warnings; and the object alone writes
nothing the webhook would not."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import KnownCluster, native_policies
from policies.model.loader import load_texts
from policies.mutate.mutation import MUTATED_ANNOTATION
from policies.native.runtime_map import NAME, SLOTS
from tests.support.builders import engine_from, policy
from tests.support.native import mutated

K8S = kubernetes_validate.latest_version()
FIRST = policy(
    "first",
    """
    priority: 10
    match:
      namespaces: ["team-*"]
      podSelector: {matchExpressions: [{key: tier, operator: NotIn, values: [cpu]}]}
      namespaceSelector: {matchExpressions: [{key: env, operator: NotIn, values: [lab]}]}
      condition: "!has(object.metadata.annotations) || !('plain' in object.metadata.annotations)"
    runtime:
      runtimeClassName: nvidia
      tolerations:
        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
        - {key: dedicated, value: gpu, effect: NoExecute, tolerationSeconds: 60}
      nodeSelector: {pool: gpu}
      env: {NVIDIA_DRIVER_CAPABILITIES: all, FIRST_ONLY: "1"}
      shmSize: 2Gi
    """,
)
SECOND = policy(
    "second",
    """
    runtime:
      runtimeClassName: nvidia-cdi
      tolerations:
        - {key: dedicated, operator: Equal, value: gpu, effect: NoExecute, tolerationSeconds: 60}
        - {operator: Exists}
      nodeSelector: {pool: default, nvidia.com/zone: a}
      env: {NVIDIA_DRIVER_CAPABILITIES: "compute,utility", QUOTED: 'say "hi" \\ there'}
      shmSize: 1Gi
    """,
)
# A rewrite beside the runtime settings: `nvidia.com/gpu: 1` becomes a slice in team-mig.
SLICES = policy(
    "slices", "priority: 20\nmatch: {namespaces: [team-mig]}\nmig: {strategy: mixed, defaultProfile: 1g.10gb}"
)
DOCUMENTS = (FIRST, SECOND, SLICES)


def generate(*documents: str) -> list[dict[str, Any]]:
    result = load_texts([(f"p{i}.yaml", d) for i, d in enumerate(documents)])
    assert not result.problems, result.problems
    return [o for o in native_policies(result.policies).objects if o["kind"].startswith("Mutating")]


def place(pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"], "namespace": namespace}}


def webhook(
    documents: tuple[str, ...], pod: dict[str, Any], namespace: str, labels: dict[str, str] | None = None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The pod as the mutating webhook leaves it, and the warnings."""
    cluster = KnownCluster(namespaces={namespace: {"kubernetes.io/metadata.name": namespace, **(labels or {})}})
    result = engine_from(*documents).mutate(place(pod, namespace), cluster=cluster)
    return json.loads(json.dumps(result.object)), result.warnings


def record(pod: dict[str, Any]) -> list[str]:
    return json.loads(pod["metadata"].get("annotations", {}).get(MUTATED_ANNOTATION, "[]"))


def without_record(pod: dict[str, Any]) -> dict[str, Any]:
    annotations = {k: v for k, v in pod["metadata"].get("annotations", {}).items() if k != MUTATED_ANNOTATION}
    metadata = {k: v for k, v in pod["metadata"].items() if k != "annotations"}
    return {**pod, "metadata": {**metadata, **({"annotations": annotations} if annotations else {})}}


def _container(name: str, resources: dict[str, str], env: list[dict[str, str]], shm: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "cuda", "resources": {"limits": resources}}
    if env:
        container["env"] = env
    if shm:
        container["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}]
    return container


def test_the_set_gets_one_object_valid_for_the_api_server_bound_everywhere_the_webhook_is():
    objects = generate(*DOCUMENTS)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("MutatingAdmissionPolicy", NAME),
        ("MutatingAdmissionPolicyBinding", NAME),
    ]
    spec = objects[0]["spec"]
    assert spec["failurePolicy"] == "Ignore" and spec["reinvocationPolicy"] == "Never"
    assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
    for obj in objects:
        kubernetes_validate.validate(obj, K8S, strict=True)


def test_a_gpu_pod_gets_every_setting_and_the_webhooks_record_in_its_order():
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "initContainers": [_container("fetch", {"nvidia.com/mig-1g.10gb": "1"}, [], False)],
            "containers": [
                _container("main", {"nvidia.com/gpu": "1"}, [{"name": "FIRST_ONLY", "value": "1"}], False),
                _container("side", {"cpu": "1"}, [], False),
            ],
        },
    }
    objects = generate(*DOCUMENTS)
    native = mutated(objects, pod, "team-a")
    alone, _ = webhook(DOCUMENTS, pod, "team-a")
    assert native == {**alone, "metadata": {**alone["metadata"], "namespace": pod["metadata"].get("namespace")}} or (
        without_record(native)["spec"] == alone["spec"]
    )
    assert native["spec"] == alone["spec"]
    assert record(native) == record(alone)  # nothing else changed: the same entries, in order
    assert native["spec"]["runtimeClassName"] == "nvidia"
    assert native["spec"]["nodeSelector"] == {"pool": "gpu", "nvidia.com/zone": "a"}
    assert [t.get("key") for t in native["spec"]["tolerations"]] == ["nvidia.com/gpu", "dedicated", None]
    assert native["spec"]["containers"][0]["env"][-1] == {"name": "QUOTED", "value": 'say "hi" \\ there'}
    assert "env" not in native["spec"]["containers"][1] and "volumeMounts" not in native["spec"]["containers"][1]
    assert native["spec"]["volumes"] == [
        {"name": "gpu-admission-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}
    ]
    after, _ = webhook(DOCUMENTS, native, "team-a")
    assert after == {**native, "metadata": {**native["metadata"], "namespace": "team-a"}}, "nothing left to write"


def test_pods_it_leaves_to_the_webhook():
    objects = generate(*DOCUMENTS)
    sliced = _container("main", {"nvidia.com/gpu": "1"}, [], False)
    base = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [sliced]}}
    left = [
        {**base, "metadata": {"name": "p", "annotations": {"gpu-admission.io/triton": "inject"}}},
        {**base, "metadata": {"name": "p", "annotations": {MUTATED_ANNOTATION: "[]"}}},
        {**base, "spec": {"containers": [{**sliced, "name": f"c{i}"} for i in range(SLOTS + 1)]}},
        {**base, "spec": {"containers": [_container("main", {"nvidia.com/gpu.shared": "1"}, [], False)]}},
        {**base, "spec": {"containers": [_container("main", {"nvidia.com/gpu": "0"}, [], False)]}},
    ]
    for pod in left:
        assert mutated(objects, pod, "team-a") == pod
    assert mutated(objects, base, "team-a") != base


def test_a_set_setting_the_node_selector_the_rewrite_steers_by_is_left_to_the_webhook_whole():
    steering = policy("steering", "runtime: {nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}")
    result = load_texts([("p0.yaml", FIRST), ("p1.yaml", steering)])
    made = native_policies(result.policies)
    assert not [o for o in made.objects if o["kind"].startswith("Mutating")]
    notes = [str(u) for u in made.uncovered if u.part == "native runtime settings"]
    assert len(notes) == 2 and "nvidia.com/gpu.product" in notes[0]


RESOURCES = ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared", "cpu"]
ENV = [
    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"},
    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "video"},
    {"name": "OTHER", "value": "1"},
]
TOLERATIONS = [  # the policies' own, and ones that differ from them in one field each
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
    {"key": "nvidia.com/gpu", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30},
    {"key": "nvidia.com/gpu", "operator": "Equal", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "gpu", "effect": "NoExecute", "tolerationSeconds": 60},
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]
containers = st.builds(
    _container,
    st.just("c"),
    st.dictionaries(st.sampled_from(RESOURCES), st.sampled_from(["0", "1", "2"]), max_size=2),
    st.lists(st.sampled_from(ENV), max_size=2, unique_by=lambda e: e["name"]),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(
    main=st.lists(containers, min_size=1, max_size=3),
    init=st.lists(containers, max_size=2),
    tolerations=st.lists(st.sampled_from(TOLERATIONS), max_size=3),
    selector=st.sampled_from([None, {"pool": "x"}, {"other": "y"}]),
    runtime_class=st.sampled_from([None, "nvidia", "kata"]),
    annotations=st.sampled_from([None, {"plain": "1"}, {"gpu-admission.io/mig-profile": "2g.20gb"}]),
    labels=st.sampled_from([None, {"tier": "cpu"}]),
    shm_volume=st.booleans(),
    namespace=st.sampled_from(["team-a", "team-mig", "ml"]),
    namespace_labels=st.sampled_from([{}, {"env": "lab"}]),
)
def test_the_webhook_after_the_native_object_leaves_each_pod_as_the_webhook_alone(
    main, init, tolerations, selector, runtime_class, annotations, labels, shm_volume, namespace, namespace_labels
):
    """Which policy's setting a key takes turns on the namespace, both label sets and a
    condition; whichever, the pod the webhook admits after the object is the one it admits alone."""
    spec: dict[str, Any] = {"containers": [{**c, "name": f"c{i}"} for i, c in enumerate(main)]}
    if init:
        spec["initContainers"] = [{**c, "name": f"i{i}"} for i, c in enumerate(init)]
    for key, value in (("tolerations", tolerations), ("nodeSelector", selector), ("runtimeClassName", runtime_class)):
        if value:
            spec[key] = value
    if shm_volume:
        spec["volumes"] = [{"name": "gpu-admission-shm", "emptyDir": {}}]
    metadata: dict[str, Any] = {"name": "p"}
    for key, value in (("annotations", annotations), ("labels", labels)):
        if value:
            metadata[key] = value
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    native = mutated(generate(*DOCUMENTS), pod, namespace, namespace_labels)
    alone, warned_alone = webhook(DOCUMENTS, pod, namespace, namespace_labels)
    both, warned_both = webhook(DOCUMENTS, native, namespace, namespace_labels)
    assert without_record(both) == without_record(alone)
    assert sorted(record(both)) == sorted(record(alone))
    assert warned_both == warned_alone
    if native != pod:  # it writes only what the webhook writes
        assert set(record(native)) <= set(record(alone))


def test_many_policies_setting_env_stay_one_object_within_the_api_servers_limits():
    """A container's env entries are grouped by policy at run time, not written out per policy
    and container: forty teams' env still make one object, and a team's pods get theirs."""
    teams = [
        policy(
            f"team-{i}",
            f"priority: {i}\nmatch: {{namespaces: [team-{i}]}}\nruntime: {{env: {{TEAM_{i}: x, SHARED: '{i}'}}}}",
        )
        for i in range(40)
    ]
    objects = generate(*teams, SECOND)
    assert [o["kind"] for o in objects] == ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]
    longest = max(len(v["expression"]) for v in objects[0]["spec"]["variables"])
    assert longest < 40_000, longest
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    pod["spec"] = {
        "containers": [_container("main", {"nvidia.com/gpu": "1"}, [{"name": "SHARED", "value": "0"}], False)]
    }
    native = mutated(objects, pod, "team-17")
    alone, _ = webhook((*teams, SECOND), pod, "team-17")
    assert native["spec"] == alone["spec"] and record(native) == record(alone)
    assert "spec.containers[0].env: TEAM_17 (policy team-17)" in record(native)
