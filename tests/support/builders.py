"""Policies from YAML text, pods and containers from a few words, the V1Pod round-trip, an engine
that checks every patch it makes, and method calls as events."""

from __future__ import annotations

import copy
import os
import textwrap
import threading
from typing import Any

import jsonpatch
import pytest
from kubernetes.client import ApiClient

from policies.engine import Engine
from policies.model.loader import load_texts
from policies.model.policyset import PolicySet
from policies.mutate.mutation import MutationResult
from policies.review.cluster import NO_CLUSTER, ClusterState
from policies.review.document import JSON
from policies.review.request import RequestInfo

_API = ApiClient()


class PatchCheckingEngine(Engine):
    """Every mutation in the suite also holds its recorded patch to the object it returns: applied
    to the pod as sent by an RFC 6902 implementation, it must yield exactly that object."""

    def mutate(
        self, raw: JSON, request: RequestInfo | None = None, cluster: ClusterState = NO_CLUSTER
    ) -> MutationResult:
        sent = copy.deepcopy(raw)
        result = super().mutate(raw, request, cluster)
        assert raw == sent, "the object as sent is never modified"
        assert jsonpatch.apply_patch(sent, list(result.patch)) == result.object, result.patch
        return result


def child_pythonpath(root: str) -> str:
    """PYTHONPATH for a server process the test starts: the suite's own first (the compiled
    engine, when tests/engine/test_compiled_engine.py runs the suite against it), then `root`."""
    return os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), root) if p)


def engine_from(*documents: str) -> Engine:
    texts = [(f"policy-{i}.yaml", textwrap.dedent(doc)) for i, doc in enumerate(documents)]
    result = load_texts(texts)
    assert not result.problems, [str(p) for p in result.problems]
    return PatchCheckingEngine(PolicySet(result.policies))


def policy(name: str = "p", spec: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(spec).strip(), "  ")
    return f"apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata:\n  name: {name}\nspec:\n{body}\n"


def pod(
    *containers: dict[str, Any],
    namespace: str = "ml",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    init: tuple[dict[str, Any], ...] = (),
    **spec: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": namespace}
    if annotations:
        metadata["annotations"] = {f"gpu-admission.io/{k}" if "/" not in k else k: v for k, v in annotations.items()}
    if labels:
        metadata["labels"] = labels
    body: dict[str, Any] = {"containers": list(containers) or [gpu_container()], **spec}
    if init:
        body["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def gpu_container(name: str = "main", gpus: int | str = 1, where: str = "limits", **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for section in ("limits", "requests") if where == "both" else (where,):
        resources[section] = {"nvidia.com/gpu": gpus}
    return {"name": name, "image": "cuda", "resources": resources, **extra}


def plain_container(name: str = "sidecar") -> dict[str, Any]:
    return {"name": name, "image": "busybox", "resources": {"limits": {"cpu": "1"}}}


def env(name: str, value: str) -> dict[str, str]:
    """One entry of a container's env."""
    return {"name": name, "value": value}


def as_v1pod_and_back(document: dict[str, Any]) -> Any:
    """Deserialize through the kubernetes client's V1Pod model and serialize again."""
    model = _API._ApiClient__deserialize(document, "V1Pod")  # type: ignore[attr-defined]
    return _API.sanitize_for_serialization(model)


class Calls:
    """The calls of a method as events: `wait_for(predicate)` is woken as each call ends, so a
    test waits for what it waits for, never out a timeout nobody signals (the fake API server's
    own `wait_for` wakes only on its own changes, not on what a replica does with them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> None:
        self._ended = threading.Condition()
        self.count = 0  # calls ended so far
        real = getattr(owner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return real(*args, **kwargs)
            finally:
                with self._ended:
                    self.count += 1
                    self._ended.notify_all()

        monkeypatch.setattr(owner, name, call)

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> bool:
        with self._ended:
            return self._ended.wait_for(predicate, timeout)
