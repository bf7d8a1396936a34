"""Native device-access checks (policies.native.device_access): what a pod writes itself to reach
GPU devices, refused by ValidatingAdmissionPolicies for the policy whose `security` settings hold,
or the defaults. Judged here with the engine's CEL (tests.support.native) beside the engine; the
real API server judges them in tests/e2e/test_native.py."""

from __future__ import annotations

import re

import kubernetes_validate
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import KnownCluster, native_policies
from policies.judge.quota import NoUsage
from policies.model.loader import load_texts
from policies.native.device_access import DEFAULT_NAME
from tests.support.builders import engine_from, policy
from tests.support.native import denials

K8S = kubernetes_validate.latest_version()
LAB = policy(
    "lab",
    """
    priority: 10
    match:
      namespaces: ["lab-*"]
      podSelector: {matchExpressions: [{key: tier, operator: NotIn, values: [open]}]}
    security: {allow: [cdiDevices]}
    """,
)
AUDITED = policy("audited", "priority: 5\nmatch: {namespaces: [lab-audit]}\nsecurity: {action: warn}")
EVERYWHERE = policy("everywhere", "rules: [{name: r, expression: 'true', message: m}]")
DOCUMENTS = (LAB, AUDITED, EVERYWHERE)
RULE = re.compile(r"\[rule (security\.[A-Za-z]+)[,\]]")

# What a pod may write, the native checks' plain reading first, then what only the webhook reads.
PLAIN_ENV = [
    ("NVIDIA_VISIBLE_DEVICES", "all"),
    ("NVIDIA_VISIBLE_DEVICES", " void "),
    ("NVIDIA_MIG_CONFIG_DEVICES", "0,1"),
    ("NVIDIA_VISIBLE_DEVICES", "None"),
    ("NVIDIA_VISIBLE_DEVICES", ""),
    ("NVIDIA_MIG_MONITOR_DEVICES", None),  # from valueFrom
    ("PATH", "/usr/bin"),
]
OTHER_ENV = [("NVIDIA_VISIBLE_DEVICES", "\u00a0void"), ("CUDA_VERSION", "12.4")]
PLAIN_PATHS = [
    "/dev/nvidia0",
    "/dev",
    "/",
    "/var/run/nvidia/driver",
    "/run/",
    "/var/lib",
    "/home/x",
    "dev/dri",
    "/devx",
]
OTHER_PATHS = ["/dev//nvidia0", "/tmp/../dev", "/./dev/char"]
PLAIN_MOUNTS = ["/var/run/nvidia-container-devices/all", "/run/nvidia-container-devices", "/data"]
PREFIXES = [None, "", "NVIDIA_", "N", "APP_"]
ANNOTATIONS = [
    {"cdi.k8s.io/gpu": "nvidia.com/gpu=all"},
    {"cdi.k8s.io/net": "example.com/nic=0"},
    {"nvidia.cdi.k8s.io/pod": "gpu=0"},
    {"nvidia.cdi.k8s.io": " "},
]


def generate(*documents: str) -> tuple[dict, ...]:
    result = load_texts([(f"p{i}.yaml", d) for i, d in enumerate(documents)])
    assert not result.problems, result.problems
    return native_policies(result.policies).objects


def security_objects() -> list[dict]:
    return [o for o in generate(*DOCUMENTS) if "security" in o["metadata"]["name"]]


def engine_refusals(pod: dict, namespace: str) -> set[str]:
    cluster = KnownCluster(namespaces={namespace: {"kubernetes.io/metadata.name": namespace}})
    placed = {**pod, "metadata": {**pod["metadata"], "namespace": namespace}}
    decision = engine_from(*DOCUMENTS).validate(placed, NoUsage(), cluster=cluster)
    return {v.rule for v in decision.verdicts if v.rule.startswith("security.") and v.action.value == "deny"}


def native_refusals(pod: dict, namespace: str) -> set[str]:
    return {rule for said in denials(security_objects(), pod, namespace) for rule in RULE.findall(said)} | {
        "error" for said in denials(security_objects(), pod, namespace) if ": error: " in said
    }


def test_a_policy_with_security_and_the_defaults_each_get_a_policy_valid_for_the_api_server():
    found = {(o["kind"], o["metadata"]["name"]): o for o in generate(*DOCUMENTS)}
    names = {"gpu-admission.lab.security", "gpu-admission.audited.security", DEFAULT_NAME}
    assert {n for k, n in found if k == "ValidatingAdmissionPolicy" and n not in ("gpu-admission.everywhere",)} == names
    actions = {n: o["spec"]["validationActions"] for (k, n), o in found.items() if k.endswith("Binding")}
    assert actions["gpu-admission.audited.security"] == ["Warn"] and actions[DEFAULT_NAME] == ["Deny"]
    lab = found["ValidatingAdmissionPolicy", "gpu-admission.lab.security"]["spec"]["validations"]
    assert not any("cdiDevices" in v["message"] for v in lab), "what the policy allows is left out"
    for obj in found.values():
        kubernetes_validate.validate(obj, K8S, strict=True)


def test_the_defaults_hold_wherever_a_cluster_policy_matches_and_nothing_without_one():
    made = generate(policy("rules-only", "rules: [{name: r, expression: 'true', message: m}]"))
    assert [o["metadata"]["name"] for o in made if "security" in o["metadata"]["name"]] == [DEFAULT_NAME] * 2
    assert native_policies(()).objects == ()


def _pod(containers: list[dict], volumes: list[str], annotations: dict, labels: dict, gpu: bool) -> dict:
    spec: dict = {"containers": containers}
    if gpu:
        containers[0].setdefault("resources", {"limits": {"nvidia.com/gpu": "1"}})
    if volumes:
        spec["volumes"] = [{"name": f"v{i}", "hostPath": {"path": p}} for i, p in enumerate(volumes)]
    metadata: dict = {"name": "p"}
    if annotations:
        metadata["annotations"] = annotations
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def containers(env_values: list, mounts: list[str]) -> st.SearchStrategy[list[dict]]:
    def container(index: int, env: list, prefixes: list, mount: list) -> dict:
        made: dict = {"name": f"c{index}", "image": "cuda"}
        if env:
            made["env"] = [
                {"name": n, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                if v is None
                else {"name": n, "value": v}
                for n, v in env
            ]
        if prefixes:
            made["envFrom"] = [
                {"configMapRef": {"name": "c"}, **({} if p is None else {"prefix": p})} for p in prefixes
            ]
        if mount:
            made["volumeMounts"] = [{"name": "v0", "mountPath": m} for m in mount]
        return made

    one = st.tuples(
        st.lists(st.sampled_from(env_values), max_size=2),
        st.lists(st.sampled_from(PREFIXES), max_size=2),
        st.lists(st.sampled_from(mounts), max_size=1),
    )
    return st.lists(one, min_size=1, max_size=2).map(lambda cs: [container(i, *c) for i, c in enumerate(cs)])


namespaces = st.sampled_from(["lab-a", "lab-audit", "ml"])
labels = st.sampled_from([{}, {"tier": "open"}])


@settings(max_examples=120, deadline=None)
@given(
    containers(PLAIN_ENV + OTHER_ENV, PLAIN_MOUNTS),
    st.lists(st.sampled_from(PLAIN_PATHS + OTHER_PATHS), max_size=2),
    st.sampled_from([{}, *ANNOTATIONS]),
    labels,
    st.booleans(),
    namespaces,
)
def test_what_the_native_checks_refuse_the_webhook_refuses(made, volumes, annotations, pod_labels, gpu, namespace):
    pod = _pod(made, volumes, annotations, pod_labels, gpu)
    assert native_refusals(pod, namespace) <= engine_refusals(pod, namespace)


@settings(max_examples=120, deadline=None)
@given(
    containers(PLAIN_ENV, PLAIN_MOUNTS),
    st.lists(st.sampled_from(PLAIN_PATHS), max_size=2),
    st.sampled_from([{}, *ANNOTATIONS]),
    labels,
    st.booleans(),
    namespaces,
)
def test_on_what_a_pod_alone_shows_they_refuse_what_the_webhook_refuses(
    made, volumes, annotations, pod_labels, gpu, namespace
):
    """Plain paths, ASCII values, no legacy CUDA image, GPUs asked for by name: the same refusals."""
    pod = _pod(made, volumes, annotations, pod_labels, gpu)
    if any("envFrom" in c for c in made) and not gpu:
        return  # a pod reaching a GPU some other way: which is the webhook's to say
    assert native_refusals(pod, namespace) == engine_refusals(pod, namespace)


def test_no_defaults_where_a_policy_with_settings_matches_every_pod():
    made = generate(policy("platform", "priority: 20\nsecurity: {action: warn}"), LAB)
    assert [o["metadata"]["name"] for o in made if o["kind"] == "ValidatingAdmissionPolicy"] == [
        "gpu-admission.platform.security"
    ], "lab comes after a policy matching every pod, and so do the defaults: neither ever holds"


def test_a_condition_past_what_the_api_server_takes_leaves_the_checks_to_the_webhook(monkeypatch):
    monkeypatch.setattr("policies.native.objects.CODE_POINT_LIMIT", 4000)  # the base checks: about 3,700
    teams = [policy(f"team-{i}", f"match: {{namespaces: [team-{i}]}}\nsecurity: {{}}") for i in range(12)]
    result = load_texts([(f"p{i}.yaml", d) for i, d in enumerate(teams)])
    native = native_policies(result.policies)
    made = {o["metadata"]["name"] for o in native.objects}
    assert "gpu-admission.team-0.security" in made and DEFAULT_NAME not in made and not native.defaults
    left = [str(u) for u in native.uncovered if "policies before it" in u.why or "cluster policies" in u.why]
    assert left and all("what the API server takes in one CEL expression" in said for said in left)
    assert "policy (the defaults): security: left to the webhook (12 cluster policies" in left[-1]
