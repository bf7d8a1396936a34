"""The workloads webhooks in deploy/base: one per kind of the workload kinds table, its rules and
matchCondition generated from the table (tools/webhook_manifests.py), so GPU-free objects never
reach the webhook and every kind of the table does."""

import copy
import json
from pathlib import Path

import pytest
import yaml
from cel_expr_python import cel

from policies.judge.controllers import pod_templates
from policies.model.workload_kinds import BUILT_IN_TABLE
from policies.native.workload_conditions import custom_kinds, kind_condition
from policies.review.pod import parse_pod
from tests.support.deploy import strip_gpus

ROOT = Path(__file__).parents[2]
WEBHOOKS = ROOT / "deploy" / "base" / "webhooks.yaml"
CORPUS = Path(__file__).parents[1] / "corpus"


def workload_webhooks() -> dict[str, dict]:
    """The deployed workloads webhooks by the kind they serve."""
    validating = [d for d in yaml.safe_load_all(WEBHOOKS.read_text()) if d["kind"] == "ValidatingWebhookConfiguration"]
    by_resource = {(w["rules"][0]["apiGroups"][0], w["rules"][0]["resources"][0]): w for w in validating[0]["webhooks"]}
    return {entry.kind: by_resource[(entry.group, entry.resource)] for entry in custom_kinds()}


def test_every_kind_of_the_table_has_its_own_webhook_and_condition():
    hooks = workload_webhooks()
    for entry in custom_kinds():
        webhook = hooks[entry.kind]
        assert webhook["name"] == f"{entry.resource}.{entry.group}.workloads.gpu-admission.io"
        assert [r["resources"] for r in webhook["rules"]] == [[entry.resource]]
        assert webhook["rules"][0]["apiVersions"] == ["*"] and webhook["rules"][0]["operations"] == ["CREATE", "UPDATE"]
        (condition,) = webhook["matchConditions"]
        assert condition["expression"] == kind_condition(entry)
        assert webhook["failurePolicy"] == "Ignore" and webhook["sideEffects"] == "None"


PROGRAM_ENV = cel.NewEnv(variables={"object": cel.Type.DYN})
PROGRAMS = {entry.kind: PROGRAM_ENV.compile(kind_condition(entry)) for entry in custom_kinds()}


def matches(obj: dict) -> bool:
    """What the API server decides for `obj`: the condition of its kind's webhook."""
    program = PROGRAMS[obj["kind"]]
    return program.eval(activation=PROGRAM_ENV.Activation({"object": obj})).plain_value()


def corpus_workloads():
    kinds = {(k.group, k.kind) for k in custom_kinds()}
    for path in sorted(CORPUS.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and (document["apiVersion"].rpartition("/")[0], document["kind"]) in kinds:
                yield pytest.param(document, id=f"{path.stem}")


@pytest.mark.parametrize("document", list(corpus_workloads()))
def test_the_condition_sends_gpu_workloads_and_leaves_gpu_free_ones_out(document):
    asks = any(parse_pod(t.pod).holds_gpu for t in pod_templates(document, "ml", BUILT_IN_TABLE))
    assert matches(document) is asks
    assert matches(strip_gpus(copy.deepcopy(document))) is False


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(
            {
                "kind": "Workflow",
                "spec": {"templates": [{"name": "t", "container": {"resources": {"limits": {"nvidia.com/gpu": 1}}}}]},
            },
            id="argo-workflow",
        ),
        pytest.param(
            {
                "kind": "InferenceService",
                "spec": {"predictor": {"model": {"resources": {"limits": {"nvidia.com/gpu": 1}}}}},
            },
            id="kserve-model",
        ),
        pytest.param(
            {
                "kind": "InferenceService",
                "spec": {"predictor": {"triton": {"resources": {"requests": {"nvidia.com/gpu": 1}}}}},
            },
            id="kserve-framework",
        ),
        pytest.param(
            {
                "kind": "Service",
                "spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}}},
            },
            id="knative-service",
        ),
        pytest.param(
            {
                "kind": "Notebook",
                "spec": {"template": {"metadata": {"annotations": {"gpu-admission.io/triton": "inject"}}}},
            },
            id="triton-asked-for",
        ),
    ],
)
def test_every_form_of_site_is_covered(obj):
    assert matches(obj) is True
    assert matches(strip_gpus(obj)) is ("triton" in str(obj) and "annotations" in str(obj))


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(
            {
                "kind": "LeaderWorkerSet",
                "spec": {
                    "leaderWorkerTemplate": {
                        "workerTemplate": {
                            "spec": {
                                "containers": [{"name": "vllm"}],
                                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}],
                            }
                        }
                    }
                },
            },
            id="a-pod-template-naming-a-claim",
        ),
        pytest.param({"kind": "NIMService", "spec": {"draResources": [{"resourceClaimName": "gpus"}]}}, id="nim-dra"),
        pytest.param(
            {
                "kind": "DynamoGraphDeployment",
                "spec": {"services": {"Worker": {"extraPodSpec": {"resourceClaims": [{"name": "g"}]}}}},
            },
            id="dynamo-extra-pod-spec",
        ),
    ],
)
def test_a_workload_whose_pods_hold_gpus_only_by_dra_claims_is_sent(obj):
    assert matches(obj) is True
    spec = json.loads(json.dumps(obj).replace('"resourceClaims"', '"other"').replace('"draResources"', '"other"'))
    assert matches(spec) is False
