"""The workloads webhook in deploy/base: rules and matchCondition generated from the workload
kinds table, so GPU-free objects never reach the webhook and every kind of the table does."""

import copy
import os
from pathlib import Path

import pytest
import yaml
from cel_expr_python import cel

from policies.model.workload_conditions import custom_kinds, match_condition, webhook_rules

ROOT = Path(__file__).parent.parent
WEBHOOKS = ROOT / "deploy" / "base" / "webhooks.yaml"
CORPUS = Path(__file__).parent / "corpus"
NAME = "validate-workloads.gpu-admission.io"


def workloads_webhook() -> dict:
    validating = [d for d in yaml.safe_load_all(WEBHOOKS.read_text()) if d["kind"] == "ValidatingWebhookConfiguration"]
    return next(w for w in validating[0]["webhooks"] if w["name"] == NAME)


def test_the_deployed_rules_and_condition_are_generated_from_the_table():
    webhook = workloads_webhook()
    expression = webhook["matchConditions"][0]["expression"]
    generated = match_condition()
    if os.environ.get("UPDATE_DEPLOY") and expression != generated.replace(" ||\n", " || "):
        text = WEBHOOKS.read_text()
        old = "\n".join("          " + line for line in _folded_lines(text))
        new = "\n".join("          " + line for line in generated.splitlines())
        WEBHOOKS.write_text(text.replace(old, new))
        webhook = workloads_webhook()
        expression = webhook["matchConditions"][0]["expression"]
    assert expression == generated.replace(" ||\n", " || "), "run with UPDATE_DEPLOY=1"
    assert webhook["rules"] == webhook_rules()
    assert webhook["failurePolicy"] == "Ignore" and webhook["sideEffects"] == "None"


def _folded_lines(text: str) -> list[str]:
    start = text.index("- name: templates-that-ask-for-a-gpu")
    block = text[start:].split("expression: >-\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if not line.startswith("          "):
            break
        lines.append(line[10:])
    return lines


PROGRAM_ENV = cel.NewEnv(variables={"object": cel.Type.DYN})
PROGRAM = PROGRAM_ENV.compile(match_condition())


def matches(obj: dict) -> bool:
    return PROGRAM.eval(activation=PROGRAM_ENV.Activation({"object": obj})).plain_value()


def corpus_workloads():
    kinds = {(k.group, k.kind) for k in custom_kinds()}
    for path in sorted(CORPUS.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and (document["apiVersion"].rpartition("/")[0], document["kind"]) in kinds:
                yield pytest.param(document, id=f"{path.stem}")


def strip_gpus(node):
    if isinstance(node, dict):
        return {k: strip_gpus(v) for k, v in node.items() if not (isinstance(k, str) and k.startswith("nvidia.com/"))}
    if isinstance(node, list):
        return [strip_gpus(v) for v in node]
    return node


@pytest.mark.parametrize("document", list(corpus_workloads()))
def test_the_condition_sends_gpu_workloads_and_leaves_gpu_free_ones_out(document):
    asks = "nvidia.com/" in yaml.safe_dump(document.get("spec"))
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
