"""Where pod templates live in the objects that make GPU pods: the workload kinds table.

A kind's pods are judged before they exist by judging its templates (`kubectl apply
--dry-run=server` of a PyTorchJob then says what its workers' pods will meet). Each site is a
dotted path into the object, `*` standing for every item of a list or value of a map, and what
sits there:
  template   a PodTemplateSpec (metadata and a pod spec), as in a Deployment
  podspec    a pod spec's fields inline (KServe's predictor); a `model` field there is one more
             container (KServe's `kserve-container`)
  container  one container, with the pod's nodeSelector, affinity and tolerations beside it
             (an Argo Workflows template)
  resources  what one pod's main container asks, outside any pod template, for an operator to
             build pods from: a ResourceRequirements (Kubeflow Trainer's resourcesPerNode,
             NIMService's resources), or an operator's own map where a bare `gpu` count means
             `gpuType` or nvidia.com/gpu and `custom` holds more resources (Dynamo, vLLM's
             production stack); `pod` names where the pod's nodeSelector, affinity, tolerations
             and runtimeClassName are, if anywhere
`replicas` are paths (with the same `*` bindings) whose whole-number values multiply into how
many pods a site makes: used to warn where they would not fit a quota. `made_by` says who makes
a kind's pods where it is not a pod controller's template: the operator, which the pod webhook
then meets.

Built in: the core controllers, Kubeflow's training jobs and notebooks, MPIJob, Ray, LeaderWorkerSet,
JobSet, Argo Workflows, KServe and Knative, Volcano, and the GPU workloads of 2025-26 whose GPU
asks are no pod template: Kubeflow Trainer v2, NVIDIA NIM, NVIDIA Dynamo, vLLM's production stack
and KServe's LLMInferenceService (policies/model/workload_kinds.py). Policy files add more with `kind: WorkloadKind`
documents (read by policies.model.loader).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

WILDCARD = "*"


class Form(enum.Enum):
    TEMPLATE = "template"
    PODSPEC = "podspec"
    CONTAINER = "container"
    RESOURCES = "resources"


class Over(enum.Enum):
    """What a `*` in a site's path runs over, where the kind's schema says (the webhook's
    matchCondition is shorter for it); the engine walks both either way."""

    ANY = "any"
    MAP = "map"
    LIST = "list"


# Where a KServe component names its model server: `model`, or a framework field of the older
# v1beta1 shape (`predictor.triton`, `predictor.pytorch`, ...); each becomes kserve-container.
KSERVE_MODEL_FIELDS = (
    "model", "tensorflow", "pytorch", "triton", "sklearn", "xgboost", "onnx", "pmml", "lightgbm", "paddle",
    "huggingface",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Site:
    path: tuple[str, ...]
    form: Form = Form.TEMPLATE
    replicas: tuple[tuple[str, ...], ...] = ()
    required: bool = False  # the kind cannot be without it (a Deployment's template)
    over: Over = Over.ANY
    pod: tuple[str, ...] = ()  # resources: where the pod-level fields are (same `*` bindings)
    model: bool = True  # podspec: a KServe `model` (or framework) field there is one more container
    # Where this field is present, the last replica count is one less (absent, it is 1): a
    # LeaderWorkerSet's leader with a template of its own is one of `size`, not one more.
    one_less_with: tuple[str, ...] = ()
    # The API versions of the kind this site is a shape of (none: every version): Dynamo's
    # v1alpha1 `spec.services` map became v1beta1's `spec.components` list of pod templates.
    versions: tuple[str, ...] = ()

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    group: str  # "" for the core group
    kind: str
    sites: tuple[Site, ...]
    resource: str = ""  # the plural the API server serves it as (for webhook rules)
    source: str = "built in"
    made_by: str = ""  # who makes its pods, where no pod template of it is copied into them
    cluster_scoped: bool = False
    versions: tuple[str, ...] = ()  # the API versions whose shape the sites are; none: every one


@dataclass(frozen=True, slots=True)
class Found:
    """One pod template of an object: where it is (a concrete dotted path), what it holds, and
    how many pods it makes."""

    path: tuple[str | int, ...]
    form: Form
    value: Any  # Any, not object: mypyc cannot build a dataclass field typed object (KeyError 'object')
    replicas: int
    required: bool = False
    pod_fields: Any = None  # resources: the object holding the pod-level fields, if any
    model: bool = True  # podspec: a KServe model field is one more container

    @property
    def dotted(self) -> str:
        return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in self.path).lstrip(".")


def split(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split(".") if part)


def _site(path: str, form: Form = Form.TEMPLATE, *replicas: str, over: Over = Over.ANY, pod: str = "") -> Site:
    return Site(split(path), form, tuple(split(r) for r in replicas), over=over, pod=split(pod))


def leader_worker_sites(spec: str, *outer: str, over: Over = Over.ANY) -> tuple[Site, Site]:
    """A LeaderWorkerSet's spec at `spec`: a leader for each of its `replicas` groups, and `size`
    workers a group, one less where the leader has a template of its own; `outer`: the counts of
    whatever makes that spec more than once (a DisaggregatedSet's slices)."""
    leader = f"{spec}.leaderWorkerTemplate.leaderTemplate"
    workers = (*outer, f"{spec}.replicas", f"{spec}.leaderWorkerTemplate.size")
    return (
        _site(leader, Form.TEMPLATE, *outer, f"{spec}.replicas", over=over),
        Site(
            split(f"{spec}.leaderWorkerTemplate.workerTemplate"),
            Form.TEMPLATE,
            tuple(split(r) for r in workers),
            over=over,
            one_less_with=split(leader),
        ),
    )


def _core(group: str, kind: str, path: str, *replicas: str) -> WorkloadKind:
    site = Site(split(path), Form.TEMPLATE, tuple(split(r) for r in replicas), required=True)
    return WorkloadKind(group, kind, (site,), kind.lower() + "s")


def _training(kind: str, field: str) -> WorkloadKind:
    sites = (_site(f"spec.{field}.*.template", Form.TEMPLATE, f"spec.{field}.*.replicas", over=Over.MAP),)
    return WorkloadKind("kubeflow.org", kind, sites, kind.lower() + "s")


def _ray(kind: str, cluster: str) -> WorkloadKind:
    base = f"spec.{cluster}." if cluster else "spec."
    sites = (
        _site(f"{base}headGroupSpec.template"),
        _site(
            f"{base}workerGroupSpecs.*.template", Form.TEMPLATE, f"{base}workerGroupSpecs.*.replicas", over=Over.LIST
        ),
    )
    return WorkloadKind("ray.io", kind, sites, kind.lower() + "s")


POD_TEMPLATE_KINDS: tuple[WorkloadKind, ...] = (
    _core("apps", "Deployment", "spec.template", "spec.replicas"),
    _core("apps", "StatefulSet", "spec.template", "spec.replicas"),
    _core("apps", "ReplicaSet", "spec.template", "spec.replicas"),
    _core("apps", "DaemonSet", "spec.template"),
    _core("batch", "Job", "spec.template", "spec.parallelism"),
    _core("batch", "CronJob", "spec.jobTemplate.spec.template", "spec.jobTemplate.spec.parallelism"),
    _training("PyTorchJob", "pytorchReplicaSpecs"),
    _training("TFJob", "tfReplicaSpecs"),
    _training("XGBoostJob", "xgbReplicaSpecs"),
    _training("PaddleJob", "paddleReplicaSpecs"),
    _training("JAXJob", "jaxReplicaSpecs"),
    _training("MXJob", "mxReplicaSpecs"),
    _training("MPIJob", "mpiReplicaSpecs"),
    WorkloadKind("kubeflow.org", "Notebook", (_site("spec.template"),), "notebooks"),
    _ray("RayCluster", ""),
    _ray("RayJob", "rayClusterSpec"),
    _ray("RayService", "rayClusterConfig"),
    WorkloadKind(
        "leaderworkerset.x-k8s.io",
        "LeaderWorkerSet",
        leader_worker_sites("spec"),
        "leaderworkersets",
    ),
    WorkloadKind(
        "jobset.x-k8s.io",
        "JobSet",
        (
            _site(
                "spec.replicatedJobs.*.template.spec.template",
                Form.TEMPLATE,
                "spec.replicatedJobs.*.replicas",
                "spec.replicatedJobs.*.template.spec.parallelism",
                over=Over.LIST,
            ),
        ),
        "jobsets",
    ),
    WorkloadKind("argoproj.io", "Workflow", (_site("spec.templates.*", Form.CONTAINER, over=Over.LIST),), "workflows"),
    WorkloadKind(
        "argoproj.io",
        "WorkflowTemplate",
        (_site("spec.templates.*", Form.CONTAINER, over=Over.LIST),),
        "workflowtemplates",
    ),
    WorkloadKind(
        "argoproj.io",
        "CronWorkflow",
        (_site("spec.workflowSpec.templates.*", Form.CONTAINER, over=Over.LIST),),
        "cronworkflows",
    ),
    WorkloadKind(
        "serving.kserve.io",
        "InferenceService",
        tuple(_site(f"spec.{part}", Form.PODSPEC) for part in ("predictor", "transformer", "explainer")),
        "inferenceservices",
    ),
    WorkloadKind("serving.knative.dev", "Service", (_site("spec.template"),), "services"),
)


@dataclass(frozen=True, slots=True)
class WorkloadTable:
    kinds: tuple[WorkloadKind, ...] = POD_TEMPLATE_KINDS

    def find(self, api_version: object, kind: object) -> WorkloadKind | None:
        """The entry for an object's apiVersion and kind (any version of its group: whether its
        shape is one the entry reads is `unread_version`'s to say)."""
        if not isinstance(kind, str) or not isinstance(api_version, str):
            return None
        group = api_version.rpartition("/")[0]
        for entry in self.kinds:
            if entry.kind == kind and entry.group == group:
                return entry
        return None

    def with_kinds(self, extra: tuple[WorkloadKind, ...]) -> WorkloadTable:
        """This table with `extra` added; an extra entry for a kind already known replaces it."""
        if not extra:
            return self
        replaced = {(k.group, k.kind) for k in extra}
        return WorkloadTable(tuple(k for k in self.kinds if (k.group, k.kind) not in replaced) + extra)


def unread_version(api_version: object, entry: WorkloadKind) -> bool:
    """Whether `api_version` is a version of the entry's group whose shape its sites do not read."""
    version = str(api_version).rpartition("/")[2]
    return bool(entry.versions) and version not in entry.versions


def templates(raw: Mapping[str, object], entry: WorkloadKind) -> Iterator[Found]:
    """Every pod template of `raw` that `entry` names, in order; absent sites are skipped, except
    a required one, found as None (the caller says what is missing). Sites of another API
    version than the object's are not read."""
    version = str(raw.get("apiVersion")).rpartition("/")[2]
    for site in entry.sites:
        if site.versions and version not in site.versions:
            continue
        expanded = list(_expand(raw, site.path))
        if not expanded and site.required:
            yield Found(site.path, site.form, None, 1, required=True)
        for path, value, bindings in expanded:
            replicas = 1
            one_less = bool(site.one_less_with) and _resolve(raw, site.one_less_with, bindings) is not None
            for i, counted in enumerate(site.replicas):
                number = _resolve(raw, counted, bindings)
                count = number if isinstance(number, int) and not isinstance(number, bool) and number >= 0 else None
                if one_less and i == len(site.replicas) - 1:
                    replicas *= max((count if count is not None else 1) - 1, 0)
                elif count is not None:
                    replicas *= count
            pod_fields = _resolve(raw, site.pod, bindings) if site.pod else None
            yield Found(path, site.form, value, replicas, pod_fields=pod_fields, model=site.model)


def _expand(
    node: object, path: tuple[str, ...], done: tuple[str | int, ...] = (), bindings: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], object, tuple[str | int, ...]]]:
    if not path:
        yield done, node, bindings
        return
    head, rest = path[0], path[1:]
    if head == WILDCARD:
        if isinstance(node, list):
            for i, item in enumerate(node):
                yield from _expand(item, rest, (*done, i), (*bindings, i))
        elif isinstance(node, Mapping):
            for key in node:
                yield from _expand(node[key], rest, (*done, str(key)), (*bindings, str(key)))
        return
    if isinstance(node, Mapping) and head in node:
        yield from _expand(node[head], rest, (*done, head), bindings)


def _resolve(node: object, path: tuple[str, ...], bindings: tuple[str | int, ...]) -> object:
    taken = iter(bindings)
    for part in path:
        if part == WILDCARD:
            key = next(taken, None)
            if isinstance(node, list):
                if not isinstance(key, int) or key >= len(node):
                    return None
                node = node[key]
            elif isinstance(node, Mapping) and key in node:
                node = node[key]
            else:
                return None
        elif isinstance(node, Mapping):
            node = node.get(part)
        else:
            return None
    return node
