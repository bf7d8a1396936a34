"""The built-in workload kinds: those with pod templates (policies.model.workloads), and the GPU
workloads of 2025-26 whose pods an operator builds from fields that are no pod template.

Each entry below is read from the kind's published API types (the Go structs its CRD is
generated from), at the version named:
- Kubeflow Trainer v2, trainer.kubeflow.org/v1alpha1 (kubeflow/trainer, pkg/apis/trainer/v1alpha1):
  a TrainJob's trainer asks `spec.trainer.resourcesPerNode` (a ResourceRequirements) on each of
  `spec.trainer.numNodes` nodes; its pods are the JobSet of the runtime `spec.runtimeRef` names,
  whose own templates (TrainingRuntime, ClusterTrainingRuntime: `spec.template`, a JobSet
  template) are judged where the runtime is applied.
- NVIDIA NIM Operator, apps.nvidia.com/v1alpha1 (NVIDIA/k8s-nim-operator, api/apps/v1alpha1,
  read at f63f74d, Aug 2026): a NIMService's `spec.resources` for each of `spec.replicas` pods,
  beside `spec.nodeSelector`, `spec.tolerations`; with `spec.multiNode`, a LeaderWorkerSet of
  `spec.replicas` groups of `multiNode.parallelism.pipeline` pods (GetLWSSize), leader and workers
  each given `spec.resources` (manifests/lws.yaml); `spec.draResources` become every pod's
  resourceClaims (a claim by name is shared by all, a template makes one per pod;
  `claimCreationSpec` makes a template the operator names, judged when it is made). A
  NIMPipeline's `spec.services[*].spec` is a NIMServiceSpec the operator makes a NIMService of
  where `enabled` is true (read here whatever `enabled` says: more, never less). A NIMCache's
  caching Job asks CPU and memory only (internal/controller/nimcache_controller.go): no entry.
- NVIDIA Dynamo, nvidia.com/v1alpha1 (ai-dynamo/dynamo, deploy/cloud/operator/api/v1alpha1):
  each of a DynamoGraphDeployment's `spec.services` asks `resources` (`gpu` a count of `gpuType`,
  default nvidia.com/gpu; `custom` more) for each of `replicas` x `multinode.nodeCount` pods,
  beside `extraPodSpec` (a PodSpec the operator merges into each pod: its resourceClaims too).
  At nvidia.com/v1beta1 (deploy/operator/api/v1beta1, the storage version its examples ship
  now) each of `spec.components` holds a native `podTemplate` for each of
  `replicas` x `multinode.nodeCount` pods (a leader and nodeCount - 1 workers per replica).
- vLLM production stack, production-stack.vllm.ai/v1alpha1 (vllm-project/production-stack,
  operator/api/v1alpha1): a VLLMRuntime's `spec.deploymentConfig.resources` (`gpu`, `gpuType`)
  for each of `spec.deploymentConfig.replicas` pods.
- KServe, serving.kserve.io/v1alpha1 LLMInferenceService: pod specs `spec.template` and
  `spec.worker` (and `spec.prefill`'s) for each of `replicas`. An LLMInferenceServiceConfig has the
  same spec (LLMInferenceServiceSpec; KServe merges well-known configs, then `spec.baseRefs`, then
  the service's own spec): its templates are judged where the config is applied, for every
  service that names it.
- DisaggregatedSet, disaggregatedset.x-k8s.io/v1 (kubernetes-sigs/lws, lws >= 0.11, its only
  served version): each of `spec.roles` inlines a LeaderWorkerSetTemplateSpec, so
  `spec.roles[*].spec` is a LeaderWorkerSet's spec, made once in each of `spec.slices` (default
  1) copies of the whole set; a role scaled `External` takes its replicas from a scaler object,
  read here from `spec.replicas` as written.
- KAITO, kaito.sh/v1beta1 (kaito-project/kaito, api/v1beta1, read at 056b828, Aug 2026): a
  Workspace's top-level `inference.template` (a PodTemplateSpec) becomes a StatefulSet of
  `status.targetNodeCount` pods (pkg/workspace/manifests), read here as `resource.count`; an
  InferenceSet makes `spec.replicas` Workspaces of `spec.template`. A preset (no template) asks
  `nvidia.com/gpu` (or a MIG profile's resource) of the node's GPU count from KAITO's SKU tables
  (pkg/workspace/inference/preset_inferences.go): not read here; its pods are judged when made.
- Volcano, batch.volcano.sh/v1alpha1 Job: `spec.tasks[*].template` for each task's `replicas`.
"""

from __future__ import annotations

from dataclasses import replace

from policies.model.workloads import (
    POD_TEMPLATE_KINDS,
    Form,
    Over,
    WorkloadKind,
    WorkloadTable,
    _site,
    leader_worker_sites,
)

TRAINER = "Kubeflow Trainer builds a JobSet from the runtime its spec.runtimeRef names"
ROLE = "spec.roles.*.spec"  # a DisaggregatedSet role's LeaderWorkerSetSpec
KAITO_TEMPLATE = "this template (a preset's pods ask each node's GPUs: judged as pods when made)"
# KServe's LLMInferenceServiceSpec, of a service and of the configs it inherits from.
LLM_SITES = tuple(
    replace(_site(path, Form.PODSPEC, replicas), model=False)  # plain pod specs
    for path, replicas in (
        ("spec.template", "spec.replicas"),
        ("spec.worker", "spec.replicas"),
        ("spec.prefill.template", "spec.prefill.replicas"),
        ("spec.prefill.worker", "spec.prefill.replicas"),
    )
)

OPERATOR_KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind(
        "trainer.kubeflow.org",
        "TrainJob",
        (_site("spec.trainer.resourcesPerNode", Form.RESOURCES, "spec.trainer.numNodes"),),
        "trainjobs",
        made_by=f"{TRAINER}, its trainer node asking spec.trainer.resourcesPerNode",
    ),
    *(
        WorkloadKind(
            "trainer.kubeflow.org",
            kind,
            (
                _site(
                    "spec.template.spec.replicatedJobs.*.template.spec.template",
                    Form.TEMPLATE,
                    "spec.template.spec.replicatedJobs.*.replicas",
                    "spec.template.spec.replicatedJobs.*.template.spec.parallelism",
                    over=Over.LIST,
                ),
            ),
            kind.lower() + "s",
            made_by=f"{TRAINER}: these templates, for each TrainJob that names it",
            cluster_scoped=kind.startswith("Cluster"),
        )
        for kind in ("TrainingRuntime", "ClusterTrainingRuntime")
    ),
    WorkloadKind(
        "apps.nvidia.com",
        "NIMService",
        (_site("spec.resources", Form.RESOURCES, "spec.replicas", "spec.multiNode.parallelism.pipeline", pod="spec"),),
        "nimservices",
        made_by="the NIM Operator makes its pods (a Deployment, or a LeaderWorkerSet for multi-node)",
    ),
    WorkloadKind(
        "apps.nvidia.com",
        "NIMPipeline",
        (
            _site(
                "spec.services.*.spec.resources",
                Form.RESOURCES,
                "spec.services.*.spec.replicas",
                "spec.services.*.spec.multiNode.parallelism.pipeline",
                over=Over.LIST,
                pod="spec.services.*.spec",
            ),
        ),
        "nimpipelines",
        made_by="the NIM Operator makes a NIMService of each service whose `enabled` is true, and its pods",
    ),
    WorkloadKind(
        "nvidia.com",
        "DynamoGraphDeployment",
        (
            replace(
                _site(
                    "spec.services.*.resources",
                    Form.RESOURCES,
                    "spec.services.*.replicas",
                    "spec.services.*.multinode.nodeCount",
                    over=Over.MAP,
                    pod="spec.services.*.extraPodSpec",
                ),
                versions=("v1alpha1",),
            ),
            replace(
                _site(
                    "spec.components.*.podTemplate",
                    Form.TEMPLATE,
                    "spec.components.*.replicas",
                    "spec.components.*.multinode.nodeCount",
                    over=Over.LIST,
                ),
                versions=("v1beta1",),
            ),
        ),
        "dynamographdeployments",
        made_by="the Dynamo operator makes each component's pods (through Grove or a LeaderWorkerSet)",
        versions=("v1alpha1", "v1beta1"),
    ),
    WorkloadKind(
        "production-stack.vllm.ai",
        "VLLMRuntime",
        (_site("spec.deploymentConfig.resources", Form.RESOURCES, "spec.deploymentConfig.replicas"),),
        "vllmruntimes",
        made_by="the vLLM production-stack operator makes its pods (a Deployment)",
    ),
    *(
        WorkloadKind(
            "serving.kserve.io",
            kind,
            LLM_SITES,
            kind.lower() + "s",
            made_by=made_by,
        )
        for kind, made_by in (
            ("LLMInferenceService", "KServe makes its pods (Deployments, or LeaderWorkerSets with a worker)"),
            (
                "LLMInferenceServiceConfig",
                "KServe merges these into each LLMInferenceService that names the config in spec.baseRefs",
            ),
        )
    ),
    WorkloadKind(
        "disaggregatedset.x-k8s.io",
        "DisaggregatedSet",
        leader_worker_sites(ROLE, "spec.slices", over=Over.LIST),
        "disaggregatedsets",
        made_by="the DisaggregatedSet controller makes a LeaderWorkerSet of each role in each slice",
    ),
    WorkloadKind(
        "kaito.sh",
        "Workspace",
        (_site("inference.template", Form.TEMPLATE, "resource.count"),),
        "workspaces",
        made_by=f"KAITO makes a StatefulSet of {KAITO_TEMPLATE}",
    ),
    WorkloadKind(
        "kaito.sh",
        "InferenceSet",
        (_site("spec.template.inference.template", Form.TEMPLATE, "spec.replicas"),),
        "inferencesets",
        made_by=f"KAITO makes a Workspace of each replica, and a StatefulSet of {KAITO_TEMPLATE}",
    ),
    WorkloadKind(
        "batch.volcano.sh",
        "Job",
        (_site("spec.tasks.*.template", Form.TEMPLATE, "spec.tasks.*.replicas", over=Over.LIST),),
        "jobs",
    ),
)

BUILT_IN: tuple[WorkloadKind, ...] = POD_TEMPLATE_KINDS + OPERATOR_KINDS
BUILT_IN_TABLE = WorkloadTable(BUILT_IN)
