"""Real public GPU manifests (tests/corpus, sources in SOURCES.md) through mutate and validate,
under the bundled default and each example policy set, as the API server would take them."""

from __future__ import annotations

import jsonpatch
import kubernetes_validate
import pytest

from policies.engine import Engine
from policies.judge.controllers import pod_templates
from policies.judge.ledger import Ledger
from policies.model.workload_kinds import BUILT_IN_TABLE
from policies.model.workloads import Form
from policies.mutate.mutation import MUTATED_ANNOTATION
from policies.review.request import RequestInfo
from tests.support.corpus import CLUSTER, SETS, engine_for, manifests, placed

K8S = kubernetes_validate.latest_version()

MULTI_GPU = ("jobset-pytorch-gpu", "leaderworkerset-vllm", "mpijob-nccl-tests", "rayservice-vllm")
HAMI = ("pod-hami-default-use", "pod-hami-memory-fraction")
UNLABELLED = (
    "deployment-plugin-mps-test",
    "deployment-plugin-test",
    "deployment-time-slicing-verification",
    "job-device-plugin-e2e",
    "mpijob-tensorflow-benchmarks",
    "pod-gpu-operator-test",
    "pytorchjob-mnist-nccl",
    "raycluster-kai-gpu-sharing",  # KAI's gpu-fraction: a GPU pod to rules too
    # The GPU workloads of 2025-26: their operators make pods with no team label from these.
    "dynamographdeployment-vllm-agg",
    "llminferenceservice-qwen2-7b-gpu",
    "nimservice-llama3-8b",
    "trainjob-flux-lammps-gpus",
    "vllmruntime-llama3-8b",
    "volcano-job-tensorflow-gpu",
)
# Workloads one of whose pods holds more than a whole namespace budget of GPU-equivalents (8 GPUs
# against 4): every pod they make would be denied, so they are, at apply time.
OVER_ALONE = ("leaderworkerset-vllm", "mpijob-nccl-tests")
# Every denial, by policy set, manifest and the rules that deny; everything else is allowed.
DENIED: dict[str, dict[str, set[str]]] = {
    # The default changes nothing a pod did not ask for and denies nothing.
    "bundled": {},
    # Several whole GPUs a pod (NCCL, vLLM tensor parallel, HAMi's 2 GPUs) pass no per-pod cap of one.
    "slices-everywhere": {
        **{name: {"quota.perPod.gpuEquivalents"} for name in MULTI_GPU + HAMI},
        **{name: {"quota.perPod.gpuEquivalents", "quota.gpuEquivalents"} for name in OVER_ALONE},
    },
    # team=a is required, and at most one GPU's worth a pod.
    "training": {
        **{name: {"require-team-label"} for name in UNLABELLED},
        **{name: {"require-team-label", "quota.perPod.gpuEquivalents"} for name in MULTI_GPU + HAMI},
        **{name: {"require-team-label", "quota.perPod.gpuEquivalents", "quota.gpuEquivalents"} for name in OVER_ALONE},
    },
    # Slices only: several GPUs a container is refused; HAMi pods still hold whole GPUs, and count;
    # no whole GPU at all, so a workload whose pods keep one (MPS) is refused at apply time.
    "dev": {
        **{name: {"mig", "quota.gpuEquivalents", "quota.gpus"} for name in MULTI_GPU},
        **{name: {"quota.gpuEquivalents", "quota.gpus"} for name in HAMI},
        "deployment-plugin-mps-test": {"quota.gpus"},
    },
    "inference": {name: {"mig"} for name in MULTI_GPU},
}


def documents(keep=lambda document: True):
    """The corpus's documents a test applies to (`keep`): chosen when collected, never skipped."""
    for stem, index, document in manifests():
        if keep(document):
            yield pytest.param(stem, document, id=f"{stem}[{index}]")


def judged(document) -> bool:
    """Judged by the engine (the built-in kinds are the same in every policy set); the CLI passes
    other kinds through."""
    return BUILT_IN_TABLE.find(document.get("apiVersion"), document.get("kind")) is not None or (
        document.get("kind") == "Pod"
    )


def core_object(document) -> bool:
    return judged(document) and document.get("apiVersion") in ("v1", "apps/v1", "batch/v1")


def workload(document) -> bool:
    return judged(document) and document.get("kind") != "Pod"


ENGINES = {name: engine_for(name) for name in SETS}


def pods_of(engine: Engine, document: dict, namespace: str) -> list[dict]:
    if document["kind"] == "Pod":
        return [document]
    return [t.pod for t in pod_templates(document, namespace, engine.policy_set.workloads)]


@pytest.mark.parametrize("policy_set", list(SETS))
@pytest.mark.parametrize("stem, document", list(documents(judged)))
def test_each_manifest_mutates_validly_converges_and_gets_its_expected_verdict(policy_set, stem, document):
    engine, namespace = ENGINES[policy_set], SETS[policy_set][1]
    document = placed(document, namespace)
    result = engine.mutate_any(document, cluster=CLUSTER)
    if document["kind"] == "Pod":
        assert jsonpatch.apply_patch(document, list(result.patch)) == result.object
    again = engine.mutate_any(result.object, cluster=CLUSTER)
    assert again.object == result.object and not again.changes, "a second pass changes nothing"
    for pod in pods_of(engine, result.object, namespace):
        pod = {**pod, "metadata": {**pod["metadata"], "name": pod["metadata"].get("name") or "p"}}
        kubernetes_validate.validate(pod, K8S, strict=True)
    decision = engine.validate(result.object if document["kind"] == "Pod" else document, Ledger(), cluster=CLUSTER)
    denied_by = {v.rule for v in decision.verdicts if v.action.value == "deny"}
    assert denied_by == DENIED[policy_set].get(stem, set())
    assert decision.allowed is (not denied_by)


@pytest.mark.parametrize("stem, document", list(documents(core_object)))
def test_core_objects_stay_valid_kubernetes_objects_after_mutation(stem, document):
    engine = ENGINES["slices-everywhere"]  # custom resources: their pods are checked above
    result = engine.mutate_any(placed(document, "ml"), cluster=CLUSTER)
    kubernetes_validate.validate(result.object, K8S, strict=True)


def test_the_default_rewrites_no_real_manifest_onto_slices():
    engine = ENGINES["bundled"]
    for param in documents():
        stem, document = param.values
        if engine.judges(document.get("apiVersion"), document.get("kind")):
            result = engine.mutate_any(placed(document, "ml"), cluster=CLUSTER)
            assert "nvidia.com/mig-" not in str(result.object), stem


@pytest.mark.parametrize("policy_set", list(SETS))
@pytest.mark.parametrize("stem, document", list(documents(workload)))
def test_the_pod_a_mutated_template_makes_is_the_mutation_of_the_pod_the_template_makes(policy_set, stem, document):
    """Template write-back keeps all that mutation did: what the controller then makes from the
    written template is what the pod webhook would make of the pod from the original one."""
    engine, namespace = ENGINES[policy_set], SETS[policy_set][1]
    document = placed(document, namespace)
    mutated = engine.mutate_any(document, cluster=CLUSTER).object
    before = pod_templates(document, namespace, engine.policy_set.workloads)
    after = pod_templates(mutated, namespace, engine.policy_set.workloads)
    for original, written in zip(before, after, strict=True):
        if original.found is not None and original.found.form is Form.RESOURCES:
            assert written.pod == original.pod  # an operator's pod: said, never written
            continue
        expected = engine.mutate(original.pod, RequestInfo(namespace=namespace), CLUSTER).object
        if original.found is not None and original.found.form is Form.PODSPEC:
            # An inline pod spec has no metadata to carry the mutation record on (KServe).
            annotations = expected["metadata"].pop("annotations", {})
            annotations.pop(MUTATED_ANNOTATION, None)
            if annotations:
                expected["metadata"]["annotations"] = annotations
        assert written.pod == expected, original.path
