"""The webhook configurations' matchConditions, run with Google's CEL as the API server runs them,
never keep from the webhook a pod the engine would act on: over random pods, whatever the engine
judges, the conditions let through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.judge.quota import NoUsage
from policies.model.cel import CelInput, compile_expression
from policies.review.pod import parse_pod
from policies.review.request import RequestInfo
from tests.support.builders import engine_from, policy

ENGINE = engine_from(policy("everywhere", "match: {}"))
WEBHOOKS = Path(__file__).resolve().parents[2] / "deploy" / "base" / "webhooks.yaml"


def _conditions(resource: str, hooks_expected: int) -> list[list[Any]]:
    documents = list(yaml.safe_load_all(WEBHOOKS.read_text()))
    hooks = [
        h
        for doc in documents
        for h in doc["webhooks"]
        if "matchConditions" in h and resource in h["rules"][0]["resources"]
    ]
    assert len(hooks) == hooks_expected
    return [[compile_expression(c["expression"]) for c in hook["matchConditions"]] for hook in hooks]


CONDITIONS = _conditions("pods", 2)
(ENV_SOURCE_CONDITIONS,) = _conditions("secrets", 1)
MOUNTS = st.sampled_from(
    ["/data", "/var/run/nvidia-container-devices/all", "/run/nvidia-container-devices/GPU-0", "/var/run/secrets/x"]
)
NAMES = st.sampled_from(
    [
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_MIG_CONFIG_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "CUDA_VERSION",
        "NVIDIA_REQUIRE_CUDA",
        "HOME",
    ]
)
PATHS = st.sampled_from(
    [
        "/",
        "//",
        "/dev",
        "/dev/",
        "/dev/nvidia0",
        "dev/nvidia-uvm",
        "/dev/char/195:0",
        "/run/nvidia",
        "/run",
        "/var/run",
        "/var/run/nvidia",
        "/var/log",
        "/etc",
        "/./dev",
        "/var/../dev/dri",
        "/etc/cdi",
        "/etc/",
        "/var/run/cdi/nvidia.yaml",
        "/var/lib/kubelet/device-plugins",
        "/var/lib/kubelet",
        "/var/lib",
        "/var",
        "/dev/vfio/7",
        "/data",
        "/proc",
    ]
)


@st.composite
def pods(draw):
    def container(name: str) -> dict[str, Any]:
        item: dict[str, Any] = {"name": name, "image": "x"}
        limits = draw(
            st.dictionaries(
                st.sampled_from(
                    [
                        "nvidia.com/gpu",
                        "nvidia.com/mig-1g.10gb",
                        "nvidia.com/gpumem",
                        "nvidia.com/hostdev",
                        "nvidia.com/pgpu",
                        "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
                        "cpu",
                    ]
                ),
                st.sampled_from(["0", "1"]),
                max_size=2,
            )
        )
        if limits:
            item["resources"] = {"limits": limits}
        env = draw(
            st.lists(
                st.fixed_dictionaries({"name": NAMES, "value": st.sampled_from(["all", "void", "0", ""])}), max_size=3
            )
        )
        if env:
            item["env"] = env
        prefixes = draw(
            st.lists(
                st.sampled_from([None, "", "N", "NVIDIA_", "NVIDIA_MIG_", "NVIDIA_REQUIRE_", "CUDA_", "APP_"]),
                max_size=2,
            )
        )
        if prefixes:
            sources = [{"configMapRef": {"name": "env"}} for _ in prefixes]
            item["envFrom"] = [s | ({} if p is None else {"prefix": p}) for s, p in zip(sources, prefixes, strict=True)]
        mounts = draw(st.lists(MOUNTS, max_size=2))
        if mounts:
            item["volumeMounts"] = [{"name": f"m{i}", "mountPath": path} for i, path in enumerate(mounts)]
        return item

    spec: dict[str, Any] = {"containers": [container("c")]}
    for key in ("initContainers", "ephemeralContainers"):
        if draw(st.booleans()):
            spec[key] = [container(key[:4])]
    if draw(st.booleans()):
        spec["runtimeClassName"] = draw(st.sampled_from(["nvidia", "nvidia-legacy", "runc", "kata"]))
    volumes = draw(st.lists(PATHS, max_size=2))
    if volumes:
        spec["volumes"] = [{"name": f"v{i}", "hostPath": {"path": path}} for i, path in enumerate(volumes)]
    annotations = draw(
        st.dictionaries(
            st.sampled_from(
                [
                    "cdi.k8s.io/gpu",
                    "nvidia.cdi.k8s.io/container.c",
                    "nvidia.cdi.k8s.io/pod",
                    "nvidia.cdi.k8s.io",
                    "kubernetes.io/config.mirror",
                    "gpu-admission.io/triton",
                    "other",
                ]
            ),
            st.sampled_from(["nvidia.com/gpu=all", "inject", "x"]),
            max_size=2,
        )
    )
    metadata: dict[str, Any] = {"name": "p", "namespace": "ml"}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


USERS = st.sampled_from(
    [
        {"username": "alice", "groups": ["dev"]},
        {"username": "system:node:gpu-1", "groups": ["system:nodes"]},
        {"username": "system:node:gpu-1", "groups": []},
    ]
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods(), USERS)
def test_every_pod_the_engine_would_act_on_reaches_the_webhook(raw, user):
    view = parse_pod(raw)
    request = RequestInfo(namespace="ml", username=user["username"], groups=tuple(user["groups"]))
    acts = view.in_scope and not (view.mirror and request.from_node)
    data = CelInput({"object": raw, "oldObject": None, "request": {"userInfo": user}})  # a CREATE
    for conditions in CONDITIONS:
        reaches = all(c.evaluate_bool(data) for c in conditions)
        assert reaches or not acts, (raw, user)


@pytest.mark.parametrize("annotation", ["gpu-fraction", "gpu-memory"])
def test_an_update_that_drops_a_share_annotation_reaches_the_validating_webhook(annotation):
    """The pod as updated reaches no GPU by itself; the pod it was held a share, which it keeps."""
    old = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {annotation: "1"}}}
    old["spec"] = {"containers": [{"name": "c", "image": "x"}], "nodeName": "gpu-1"}
    new = {**old, "metadata": {"name": "p"}}
    data = CelInput({"object": new, "oldObject": old, "request": {"userInfo": {"username": "alice"}}})
    validating = CONDITIONS[1]
    assert all(c.evaluate_bool(data) for c in validating)
    created = CelInput({"object": new, "oldObject": None, "request": {"userInfo": {"username": "alice"}}})
    assert not all(c.evaluate_bool(created) for c in validating)  # and no other pod is sent for it


ENV_KEYS = st.sampled_from(
    [
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_MIG_MONITOR_DEVICES",
        "CUDA_VERSION",
        "NVIDIA_REQUIRE_CUDA",
        "VISIBLE_DEVICES",
        "A",
    ]
)
ENV_VALUES = st.sampled_from(["all", "void", "", "0", "YWxs", "!!"])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["ConfigMap", "Secret"]), st.none() | st.dictionaries(ENV_KEYS, ENV_VALUES, max_size=3))
def test_every_configmap_and_secret_the_engine_would_deny_reaches_the_webhook(kind, data):
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "env", "namespace": "ml"}}
    if data is not None:
        raw["data"] = data
    decision = ENGINE.validate(raw, NoUsage(), RequestInfo(namespace="ml"))
    reaches = all(c.evaluate_bool(CelInput({"object": raw})) for c in ENV_SOURCE_CONDITIONS)
    assert reaches or decision.allowed, raw


(SCALE_CONDITIONS,) = _conditions("deployments/scale", 1)
COUNTS = st.none() | st.integers(min_value=0, max_value=40)


@settings(max_examples=200, deadline=None)
@given(COUNTS, COUNTS)
def test_every_scale_up_reaches_the_webhook_and_nothing_else(was, now):
    """A Scale's spec.replicas is omitted at 0 (omitempty): absent reads as 0."""

    def scale(replicas: int | None) -> dict[str, Any]:
        spec = {} if replicas is None else {"replicas": replicas}
        return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "s"}, "spec": spec}

    reaches = all(c.evaluate_bool(CelInput({"object": scale(now), "oldObject": scale(was)})) for c in SCALE_CONDITIONS)
    assert reaches == ((now or 0) > (was or 0))
