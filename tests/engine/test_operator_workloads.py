"""Workloads whose pods an operator builds from a resources field (Kubeflow Trainer v2, NIM, Dynamo,
vLLM's production stack), judged for what their pods will ask, over HTTPS as the workload
webhook is called; and certain failure denied at apply time."""

from __future__ import annotations

from typing import Any

import pytest

from policies.judge.controllers import pod_templates
from policies.judge.quota import NoUsage
from policies.model.loader import load_texts
from tests.support.builders import engine_from, policy
from tests.support.server_harness import ApiServer, admission_review, api_server, holder_of

POLICIES = [
    policy("one-gpu-a-pod", 'match: {namespaces: [capped]}\nquota: {perPod: {gpuEquivalents: "1"}}'),
    policy("no-whole-gpus", "match: {namespaces: [sliced]}\nquota: {limits: {gpus: 0}}"),
    policy("four-gpus", "match: {namespaces: [team]}\nquota: {limits: {gpus: 4}}"),
]


def trainjob(namespace: str, gpus: int, nodes: int) -> dict[str, Any]:
    trainer = {"numNodes": nodes, "resourcesPerNode": {"limits": {"nvidia.com/gpu": gpus}}}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": namespace},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer},
    }


def dynamo(namespace: str, **resources: Any) -> dict[str, Any]:
    worker = {"replicas": 2, "resources": {"limits": resources}, "extraPodSpec": {"nodeSelector": {"pool": "gpu"}}}
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "agg", "namespace": namespace},
        "spec": {"services": {"Frontend": {"replicas": 1}, "Worker": worker}},
    }


def deployment(namespace: str, replicas: int, gpus: int) -> dict[str, Any]:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve", "namespace": namespace},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [container]}}},
    }


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with api_server(holder_of(engine_from(*POLICIES)), tmp_path_factory.mktemp("certs")) as server:
        yield server


def review(api: ApiServer, obj: dict[str, Any]) -> dict[str, Any]:
    status, body = api.client.review("/validate", admission_review(obj))
    assert status == 200
    return body["response"]


@pytest.mark.parametrize(
    "obj, reason",
    [
        (trainjob("capped", 8, 2), "TrainJob capped/llama spec.trainer.resourcesPerNode"),
        (dynamo("capped", gpu="2"), "DynamoGraphDeployment capped/agg spec.services.Worker.resources"),
        (dynamo("capped", gpu="1", gpuType="nvidia.com/mig-7g.80gb", custom={"nvidia.com/gpu": "1"}), "per-pod cap"),
    ],
    ids=["trainer-nodes-of-8-gpus", "dynamo-workers-of-2-gpus", "dynamo-gpu-type-and-custom-add-up"],
)
def test_an_operators_pods_are_judged_for_what_they_will_ask_and_denied_at_apply(api, obj, reason):
    response = review(api, obj)
    assert response["allowed"] is False
    assert reason in response["status"]["message"]


def test_what_an_operators_pods_ask_within_the_caps_is_admitted(api):
    assert review(api, trainjob("capped", 1, 4))["allowed"]
    assert review(api, dynamo("capped", gpu="1"))["allowed"]


def test_a_template_one_pod_of_which_overruns_a_budget_alone_is_denied_and_replicas_together_only_warn(api):
    alone = review(api, deployment("sliced", 1, 1))
    assert alone["allowed"] is False
    assert "every pod of this template would be denied: sliced: gpus 0 + 1 exceeds 0" in alone["status"]["message"]
    together = review(api, deployment("team", 3, 2))
    assert together["allowed"] is True
    assert any("3 replicas would hold gpus 0 + 3x2 = 6, over 4" in w for w in together["warnings"])


def test_validate_says_who_makes_the_pods_and_what_the_pod_webhook_will_do():
    engine = engine_from(policy("defaults", 'match: {namespaces: [ml]}\nruntime: {env: {NCCL_DEBUG: "INFO"}}'))
    decision = engine.validate(trainjob("ml", 8, 2), NoUsage())
    (note,) = decision.notes
    assert note.startswith("spec.trainer.resourcesPerNode: Kubeflow Trainer builds a JobSet from the runtime")
    assert "the pod webhook will then make these changes: spec.containers[0].env: NCCL_DEBUG" in note
    mutated = engine.mutate_any(trainjob("ml", 8, 2))
    assert mutated.object == trainjob("ml", 8, 2) and not mutated.changes  # nothing written into the TrainJob
    assert note in mutated.warnings


def test_the_pod_an_operator_builds_carries_the_pod_fields_the_kind_keeps():
    engine = engine_from(policy("pinned", 'match: {namespaces: [ml]}\nquota: {perPod: {gpuEquivalents: "1"}}'))
    # The Frontend names no resources: no pod of it is judged (it asks for nothing).
    (worker,) = pod_templates(dynamo("ml", gpu="1"), "ml", engine.policy_set.workloads)
    assert worker.path == "spec.services.Worker.resources"
    assert worker.pod["spec"]["nodeSelector"] == {"pool": "gpu"} and worker.replicas == 2
    assert worker.pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}


WORKLOAD_KIND = """\
apiVersion: gpu-admission.io/v1alpha1
kind: WorkloadKind
metadata: {name: %s}
spec:
  group: %s
  kind: %s
  templates: [%s]
"""


@pytest.mark.parametrize(
    "text, problem, advice",
    [
        (
            WORKLOAD_KIND % ("agents", "example.com", "Agent", "{path: spec.gpu, form: resources, pod: spec}"),
            "",
            "",
        ),
        (
            WORKLOAD_KIND % ("bad", "example.com", "Agent", "{path: spec.template, form: template, pod: spec}"),
            "for a `resources` site only",
            "",
        ),
        (
            WORKLOAD_KIND % ("mine", "trainer.kubeflow.org", "TrainJob", "{path: spec.podTemplate}"),
            "",
            "replaces the built-in TrainJob of trainer.kubeflow.org, which reads spec.trainer.resourcesPerNode",
        ),
    ],
    ids=["a-resources-site-with-its-pod-fields", "pod-fields-on-a-template-site", "a-built-in-kind-replaced"],
)
def test_workload_kinds_load_with_resources_sites_and_lint_says_what_a_replacement_replaces(text, problem, advice):
    result = load_texts((("kinds.yaml", text),))
    assert [p.message for p in result.problems if problem in p.message] if problem else not result.problems
    assert any(advice in a.message for a in result.advice) if advice else not result.advice


def leader_worker_set(leader_gpus: int | None, worker_gpus: int, replicas: int = 2, size: int = 4) -> dict[str, Any]:
    def template(gpus: int) -> dict[str, Any]:
        container = {"name": "main", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
        return {"spec": {"containers": [container]}}

    lws: dict[str, Any] = {"size": size, "workerTemplate": template(worker_gpus)}
    if leader_gpus is not None:
        lws["leaderTemplate"] = template(leader_gpus)
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": "team"},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": lws},
    }


@pytest.mark.parametrize(
    "leader, pods",
    [(1, {"spec.leaderWorkerTemplate.leaderTemplate": 2, "spec.leaderWorkerTemplate.workerTemplate": 6}), (None, {})],
    ids=["a-leader-template-is-one-of-size", "no-leader-template-every-pod-a-worker"],
)
def test_a_leader_worker_set_makes_size_pods_a_group_leader_included(leader, pods):
    """LWS: each of `replicas` groups is `size` pods, the leader one of them (from its own template
    where there is one): 2 groups of 4 with a leader template are 2 leaders and 6 workers, not 8."""
    engine = engine_from(policy("p", "match: {namespaces: [team]}"))
    found = {
        t.path: t.replicas for t in pod_templates(leader_worker_set(leader, 2), "team", engine.policy_set.workloads)
    }
    assert found == (pods or {"spec.leaderWorkerTemplate.workerTemplate": 8})


def dynamo_v1beta1(namespace: str, gpus: int, replicas: int = 2, nodes: int = 1) -> dict[str, Any]:
    """The shape Dynamo's examples ship now: each component a native pod template."""
    main = {"name": "main", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    worker: dict[str, Any] = {
        "name": "VllmDecodeWorker",
        "type": "decode",
        "replicas": replicas,
        "podTemplate": {"spec": {"containers": [main]}},
    }
    if nodes > 1:
        worker["multinode"] = {"nodeCount": nodes}
    frontend = {"name": "Frontend", "type": "frontend", "podTemplate": {"spec": {"containers": [{"name": "main"}]}}}
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "disagg", "namespace": namespace},
        "spec": {"backendFramework": "vllm", "components": [frontend, worker]},
    }


def test_a_dynamo_v1beta1_deployment_is_judged_by_its_components_pod_templates(api):
    """v1beta1 (Dynamo's storage version) holds `spec.components[*].podTemplate`: its 16 GPUs are
    seen, not judged as empty (before, it was allowed and charged 0)."""
    response = review(api, dynamo_v1beta1("capped", 8, replicas=2))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "DynamoGraphDeployment capped/disagg spec.components[1].podTemplate" in message
    assert "per-pod cap" in message
    assert review(api, dynamo_v1beta1("capped", 1))["allowed"]


def test_a_dynamo_v1beta1_component_makes_replicas_times_node_count_pods():
    engine = engine_from(policy("p", "match: {namespaces: [ml]}"))
    found = pod_templates(dynamo_v1beta1("ml", 8, replicas=2, nodes=4), "ml", engine.policy_set.workloads)
    # v1alpha1's `spec.services` is not read at v1beta1: only the components' templates are found.
    assert {t.path: t.replicas for t in found} == {
        "spec.components[0].podTemplate": 1,
        "spec.components[1].podTemplate": 8,
    }


def test_a_dynamo_deployment_at_a_version_whose_shape_is_not_read_is_skipped_and_said(api):
    newer = dynamo("capped", gpu="16")
    newer["apiVersion"] = "nvidia.com/v2"
    response = review(api, newer)
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert "DynamoGraphDeployment nvidia.com/v2 is not judged: gpu-admission reads nvidia.com/v1alpha1" in warning


def nimservice(namespace: str, replicas: int = 1, **spec: Any) -> dict[str, Any]:
    """A NIMService (apps.nvidia.com/v1alpha1) asking 8 GPUs a pod, as NVIDIA's multi-node samples do."""
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": "llama-405b", "namespace": namespace},
        "spec": {"replicas": replicas, "resources": {"limits": {"nvidia.com/gpu": 8}}, **spec},
    }


@pytest.mark.parametrize(
    "multi_node, pods",
    [
        ({"parallelism": {"pipeline": 2, "tensor": 8}}, 2),  # a leader and one worker, 8 GPUs each
        ({"backendType": "lws", "parallelism": {"tensor": 8}}, 1),  # no pipeline: no more pods than one
        (None, 1),
    ],
    ids=["pipeline-of-two", "tensor-only", "single-node"],
)
def test_a_multi_node_nimservice_makes_replicas_times_pipeline_pods_each_with_its_resources(multi_node, pods):
    """The NIM Operator's LeaderWorkerSet has size `parallelism.pipeline` (GetLWSSize), leader and
    workers each asking `spec.resources` (manifests/lws.yaml): 16 GPUs in two pods, not 8 in one."""
    engine = engine_from(policy("p", "match: {namespaces: [ml]}"))
    extra = {"multiNode": multi_node} if multi_node else {}
    (found,) = pod_templates(nimservice("ml", 2, **extra), "ml", engine.policy_set.workloads)
    assert found.replicas == 2 * pods


def test_a_multi_node_nimservice_is_warned_of_for_all_the_gpus_its_groups_hold():
    engine = engine_from(policy("sixteen", "match: {namespaces: [ml]}\nquota: {limits: {gpus: 12}}"))
    decision = engine.validate(nimservice("ml", multiNode={"parallelism": {"pipeline": 2}}), NoUsage())
    assert any("2 replicas would hold gpus 0 + 2x8 = 16, over 12" in w for w in decision.warnings), decision.warnings


def test_a_nimservices_dra_resources_are_every_pods_claims():
    """draResources become the resourceClaims of each pod the operator makes (its
    resourceclaims.go): a claim by name, a template; a claimCreationSpec names a template the
    operator makes later, judged then."""
    engine = engine_from(policy("p", "match: {namespaces: [ml]}"))
    dra = [
        {"resourceClaimName": "shared-gpus"},
        {"resourceClaimTemplateName": "one-gpu", "requests": ["gpu"]},
        {"claimCreationSpec": {"devices": [{"name": "gpu", "count": 2, "deviceClassName": "gpu.nvidia.com"}]}},
    ]
    (found,) = pod_templates(nimservice("ml", draResources=dra), "ml", engine.policy_set.workloads)
    assert found.pod["spec"]["resourceClaims"] == [
        {"name": "dra-0", "resourceClaimName": "shared-gpus"},
        {"name": "dra-1", "resourceClaimTemplateName": "one-gpu"},
    ]


def test_a_dynamo_v1alpha1_services_extra_pod_spec_claims_are_its_pods_claims():
    engine = engine_from(policy("p", "match: {namespaces: [ml]}"))
    graph = dynamo("ml", gpu="1")
    graph["spec"]["services"]["Worker"]["extraPodSpec"]["resourceClaims"] = [
        {"name": "gpus", "resourceClaimTemplateName": "two-gpus"}
    ]
    (worker,) = pod_templates(graph, "ml", engine.policy_set.workloads)
    assert worker.pod["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]


def test_a_nim_pipelines_services_are_judged_as_the_nimservices_it_makes():
    engine = engine_from(policy("p", "match: {namespaces: [ml]}"))
    multi = nimservice("ml", 2, multiNode={"parallelism": {"pipeline": 2}})["spec"]
    single = nimservice("ml")["spec"]
    pipeline = {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMPipeline",
        "metadata": {"name": "rag", "namespace": "ml"},
        "spec": {"services": [{"name": "llm", "enabled": True, "spec": multi}, {"name": "embed", "spec": single}]},
    }
    found = pod_templates(pipeline, "ml", engine.policy_set.workloads)
    assert {t.path: t.replicas for t in found} == {
        "spec.services[0].spec.resources": 4,
        "spec.services[1].spec.resources": 1,  # not enabled: read all the same, more never less
    }


def test_an_llm_inference_service_config_is_judged_for_the_pods_of_every_service_that_names_it():
    """KServe merges a config's LLMInferenceServiceSpec into each service naming it in
    spec.baseRefs: the config's templates are judged where the config is applied."""
    engine = engine_from(policy("capped", 'match: {namespaces: [ml]}\nquota: {perPod: {gpuEquivalents: "1"}}'))
    container = {"name": "main", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": 4}}}
    config = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "LLMInferenceServiceConfig",
        "metadata": {"name": "four-gpus", "namespace": "ml"},
        "spec": {"replicas": 2, "template": {"containers": [container]}},
    }
    decision = engine.validate(config, NoUsage())
    assert not decision.allowed and "spec.template" in decision.message, decision.message


def test_a_disaggregated_set_makes_each_roles_leader_worker_set_in_every_slice():
    """disaggregatedset.x-k8s.io/v1 (the LeaderWorkerSet project): each role inlines a
    LeaderWorkerSet's spec, made once per slice: 2 slices of a decode role of 3 groups of 4 (a
    leader and 3 workers) and a prefill role of 2 single pods."""
    engine = engine_from(policy("p", "match: {namespaces: [ml]}"))
    pod_spec = {"containers": [{"name": "vllm", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}
    decode = {
        "replicas": 3,
        "leaderWorkerTemplate": {"size": 4, "leaderTemplate": {"spec": pod_spec}, "workerTemplate": {"spec": pod_spec}},
    }
    prefill = {"replicas": 2, "leaderWorkerTemplate": {"workerTemplate": {"spec": pod_spec}}}
    dset = {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSet",
        "metadata": {"name": "pd", "namespace": "ml"},
        "spec": {"slices": 2, "roles": [{"name": "decode", "spec": decode}, {"name": "prefill", "spec": prefill}]},
    }
    found = pod_templates(dset, "ml", engine.policy_set.workloads)
    assert {t.path: t.replicas for t in found} == {
        "spec.roles[0].spec.leaderWorkerTemplate.leaderTemplate": 6,
        "spec.roles[0].spec.leaderWorkerTemplate.workerTemplate": 18,
        "spec.roles[1].spec.leaderWorkerTemplate.workerTemplate": 4,
    }


def test_kaito_workspaces_and_inference_sets_are_judged_by_their_pod_templates():
    """KAITO (kaito.sh/v1beta1): a Workspace's top-level inference.template is a StatefulSet of
    resource.count pods; an InferenceSet makes spec.replicas Workspaces of its template."""
    engine = engine_from(policy("capped", 'match: {namespaces: [ml]}\nquota: {perPod: {gpuEquivalents: "1"}}'))
    container = {"name": "phi", "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": 2}}}
    template = {"spec": {"containers": [container]}}
    workspace = {
        "apiVersion": "kaito.sh/v1beta1",
        "kind": "Workspace",
        "metadata": {"name": "phi", "namespace": "ml"},
        "resource": {"count": 2, "labelSelector": {"matchLabels": {"apps": "phi"}}},
        "inference": {"template": template},
    }
    inference_set = {
        "apiVersion": "kaito.sh/v1beta1",
        "kind": "InferenceSet",
        "metadata": {"name": "phi", "namespace": "ml"},
        "spec": {"replicas": 3, "template": {"resource": {}, "inference": {"template": template}}},
    }
    for obj, path, pods in (
        (workspace, "inference.template", 2),
        (inference_set, "spec.template.inference.template", 3),
    ):
        (found,) = pod_templates(obj, "ml", engine.policy_set.workloads)
        assert (found.path, found.replicas) == (path, pods)
        decision = engine.validate(obj, NoUsage())
        assert not decision.allowed and "over the per-pod cap of 1" in decision.message, decision.message
    preset = dict(workspace, inference={"preset": {"name": "phi-4"}})
    assert pod_templates(preset, "ml", engine.policy_set.workloads) == ()
