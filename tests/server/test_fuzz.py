"""Malformed input is the requester's error, never the engine's: objects mangled at random depths
(wrong types, absurd values) through the engine and the real HTTPS server, where every answer
must be a verdict or a 4xx naming the field, never an internal error."""

from __future__ import annotations

import contextlib
import copy
import json
import os
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from policies.errors import InputError
from policies.judge.ledger import Ledger
from policies.review.request import Operation, RequestInfo
from tests.support.builders import engine_from, policy
from tests.support.server_harness import Client, admission_review, holder_of, https_server

ENGINE = engine_from(
    policy(
        "all",
        """
mig: {gpuModels: [A100-80GB, H100-80GB], defaultProfile: 1g.10gb, allowedProfiles: [1g.10gb, 2g.20gb]}
runtime: {runtimeClassName: nvidia, env: {NVIDIA_DRIVER_CAPABILITIES: "compute,utility"}, shmSize: 1Gi,
          tolerations: [{key: nvidia.com/gpu, operator: Exists}], nodeSelector: {pool: gpu}}
triton: {modelRepository: "s3://m", profile: 1g.10gb}
rules:
  - {name: team, expression: "has(object.metadata.labels) && 'team' in object.metadata.labels", message: m}
  - {name: old, expression: "oldObject == null || oldObject.metadata.name == object.metadata.name", message: o}
quota: {limits: {gpuEquivalents: "4", pods: 5, slices: {1g.10gb: 3}}, perPod: {gpus: 1}, sharedWeight: "1/2"}
""",
    )
)
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "ml",
        "labels": {"team": "a"},
        "annotations": {"gpu-admission.io/gpu-memory": "15Gi", "gpu-admission.io/triton": "inject"},
        "uid": "u",
    },
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "cuda",
                "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}},
                "env": [{"name": "A", "value": "b"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
                "envFrom": [{"prefix": "X_", "configMapRef": {"name": "c"}}],
                "volumeMounts": [{"name": "v", "mountPath": "/data"}],
            }
        ],
        "initContainers": [
            {
                "name": "i",
                "image": "x",
                "restartPolicy": "Always",
                "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}},
            }
        ],
        "volumes": [{"name": "v", "hostPath": {"path": "/data"}}],
        "nodeSelector": {"zone": "a"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "runtimeClassName": "nvidia",
    },
    "status": {"phase": "Pending"},
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d", "namespace": "ml"},
    "spec": {"replicas": 3, "template": {"metadata": {"labels": {"team": "a"}}, "spec": copy.deepcopy(POD["spec"])}},
}
CRONJOB = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "c", "namespace": "ml"},
    "spec": {"jobTemplate": {"spec": {"parallelism": 2, "template": {"spec": copy.deepcopy(POD["spec"])}}}},
}
junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["1e600000", "-1", "0.5", "NaN", "nvidia.com/gpu", "Always", "In", "", "/dev/nvidia0"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.sampled_from(["name", "key", "values"]), inner, max_size=3)
    ),
    max_leaves=6,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += paths(item, (*prefix, i))
    return found


@st.composite
def mangled(draw, base):
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths(obj)))
        if not where:
            continue
        parent = obj
        for step in where[:-1]:
            parent = parent[step]
        parent[where[-1]] = draw(junk)
    return obj


def judged(call):
    """The engine answers, or refuses the object as malformed: nothing else may come out."""
    with contextlib.suppress(InputError):
        call()


@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.sampled_from([POD, DEPLOYMENT, CRONJOB]).flatmap(mangled), st.sampled_from(list(Operation)))
def test_the_engine_answers_or_refuses_whatever_object_it_is_given(obj, operation):
    request = RequestInfo(namespace="ml", operation=operation, old_object=copy.deepcopy(POD))
    judged(lambda: ENGINE.mutate(obj, request))
    judged(lambda: ENGINE.validate(obj, Ledger(), request))
    judged(lambda: ENGINE.validate(copy.deepcopy(POD), Ledger(), request._replace(old_object=obj)))


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with https_server(holder_of(ENGINE), tmp_path_factory.mktemp("certs")) as (port, ca):
        connection = Client(port, ca)
        yield connection
        connection.close()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from([POD, DEPLOYMENT]).flatmap(lambda base: st.tuples(st.just(base), mangled(base))),
    st.sampled_from(["/mutate", "/validate"]),
)
def test_every_well_formed_review_is_answered_200_with_a_verdict_never_an_internal_error(client, case, path):
    """A non-200 would be a failed call to the API server: a mangled object is denied, not failed."""
    base, obj = case
    review = admission_review(obj, namespace="ml", kind=base["kind"], api_version=base["apiVersion"])
    try:  # what the API server sends is JSON: no NaN, no lone surrogates (those bodies are a 400)
        body = json.dumps(review, default=str, allow_nan=False).encode("utf-8")
        orjson.loads(body)  # a lone surrogate escape is no JSON the API server (Go) would write
    except (ValueError, UnicodeEncodeError):
        assume(False)
    status, answer = client.request("POST", path + "?timeout=5s", body)
    assert status == 200, (status, answer)
    response = answer["response"]
    assert response.get("status", {}).get("code") != 500, response
    assert "Traceback" not in json.dumps(answer)
    if not response["allowed"]:
        assert response["status"]["code"] in (400, 403, 422) and response["status"]["message"]
