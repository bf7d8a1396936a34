"""Pod controllers and other workloads: their pod templates judged as the pods they will create.

`kubectl apply --dry-run=server` of a Deployment, a PyTorchJob or a RayCluster reaches pod
webhooks only when the controller later creates pods, so judging the templates is what gives
feedback at apply time. Where templates live in each kind is the workload table
(policies.model.workloads): built in, and extended by WorkloadKind documents.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

from policies.errors import InputError
from policies.gpu.models import WHOLE_GPU_RESOURCE
from policies.json_fields import json_list, mapping
from policies.model.workloads import KSERVE_MODEL_FIELDS, Form, Found, WorkloadKind, WorkloadTable, templates
from policies.review.document import JSON

# The fields of a v1 PodSpec: what a `podspec` site keeps (a KServe component carries its own
# fields beside them: minReplicas, canaryTrafficPercent, logger, ...).
POD_SPEC_FIELDS = frozenset(
    {
        "activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers", "dnsConfig",
        "dnsPolicy", "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC", "hostNetwork",
        "hostPID", "hostUsers", "hostname", "imagePullSecrets", "initContainers", "nodeName", "nodeSelector",
        "os", "overhead", "preemptionPolicy", "priority", "priorityClassName", "readinessGates",
        "resourceClaims", "resources", "restartPolicy", "runtimeClassName", "schedulerName", "schedulingGates",
        "securityContext", "serviceAccount", "serviceAccountName", "setHostnameAsFQDN", "shareProcessNamespace",
        "subdomain", "terminationGracePeriodSeconds", "tolerations", "topologySpreadConstraints", "volumes",
    }
)  # fmt: skip
# The fields of a v1 Container: what a KServe model (a container with KServe's own fields beside
# them: storageUri, runtime, modelFormat) lends its kserve-container, and gets back.
CONTAINER_FIELDS = frozenset(
    {
        "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
        "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts", "volumeDevices",
        "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
        "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce", "tty",
    }
)  # fmt: skip
# An Argo Workflows template's pod-level fields besides its one container (or script).
CONTAINER_SITE_POD_FIELDS = ("nodeSelector", "affinity", "tolerations", "volumes", "initContainers", "securityContext")
# The pod-level fields an operator copies into the pods it builds from a `resources` site.
OPERATOR_POD_FIELDS = ("nodeSelector", "affinity", "tolerations", "runtimeClassName", "schedulerName", "resourceClaims")
KSERVE_CONTAINER = "kserve-container"


def model_field(value: dict[str, object]) -> str | None:
    return next((f for f in KSERVE_MODEL_FIELDS if isinstance(value.get(f), dict)), None)


@dataclass(frozen=True, slots=True)
class Template:
    pod: JSON
    replicas: int
    path: str
    found: Found | None = None


def workload_kind(raw: JSON, table: WorkloadTable) -> WorkloadKind:
    entry = table.find(raw.get("apiVersion"), raw.get("kind"))
    if entry is None:
        known = ", ".join(sorted({k.kind for k in table.kinds}))
        raise InputError("kind", f"expected a Pod or a workload whose pod templates are known ({known})")
    return entry


def pod_templates(raw: JSON, namespace: str, table: WorkloadTable) -> tuple[Template, ...]:
    """Every pod a workload will create, each as a v1 Pod in the workload's namespace (`namespace`:
    the request's, which the API server sets; a template's own namespace is never used, since the
    controller creates its pods where it lives). Sites absent from the object are skipped; a site
    present but malformed is an InputError naming its path."""
    entry = workload_kind(raw, table)
    controller_meta = mapping(raw.get("metadata"), "metadata")
    namespace = namespace or str(controller_meta.get("namespace") or "")
    found = [_template(raw, site, namespace, controller_meta) for site in templates(raw, entry)]
    return tuple(t for t in found if t is not None)


def _template(raw: JSON, found: Found, namespace: str, owner: Mapping[str, object]) -> Template | None:
    dotted = found.dotted
    value = found.value
    if value is None and found.required:
        raise InputError(dotted, f"a {raw.get('kind')} needs a pod template with a spec")
    if not isinstance(value, dict):
        raise InputError(dotted, "must be a mapping (a pod template)")
    if found.form is Form.TEMPLATE:
        if not isinstance(value.get("spec"), dict):
            raise InputError(dotted, f"a {raw.get('kind')} needs a pod template with a spec")
        metadata, spec = dict(mapping(value.get("metadata"), f"{dotted}.metadata")), value["spec"]
    elif found.form is Form.PODSPEC:
        metadata, spec = {}, _component_spec(value, found.model)
    elif found.form is Form.RESOURCES:
        metadata, spec = {}, _operator_pod(value, found.pod_fields, dotted)
    else:
        container = value.get("container") or value.get("script")
        if container is None:
            return None  # steps, a DAG, a resource template: no pod of its own
        if not isinstance(container, dict):
            raise InputError(f"{dotted}.container", "must be a mapping (a container)")
        main = {k: v for k, v in container.items() if k != "source"}
        main.setdefault("name", "main")
        spec = {"containers": [main], **{k: value[k] for k in CONTAINER_SITE_POD_FIELDS if k in value}}
        metadata = dict(mapping(value.get("metadata"), f"{dotted}.metadata"))
    metadata["namespace"] = namespace
    metadata.setdefault("name", str(owner.get("name") or owner.get("generateName") or ""))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    return Template(pod, found.replicas, dotted, found)


def _component_spec(value: dict[str, object], model_container: bool = True) -> JSON:
    """A KServe component as a pod spec: its PodSpec fields, its `model` as kserve-container
    (`model_container` False: a plain pod spec, as LLMInferenceService's)."""
    spec = {k: v for k, v in value.items() if k in POD_SPEC_FIELDS}
    field = model_field(value) if model_container else None
    model = value[field] if field else None
    if isinstance(model, dict):
        container = {k: v for k, v in model.items() if k in CONTAINER_FIELDS and k != "name"}
        others = spec.get("containers")
        spec["containers"] = [{"name": KSERVE_CONTAINER, **container}, *(others if isinstance(others, list) else [])]
    spec.setdefault("containers", [])
    return spec


def _operator_pod(value: dict[str, object], pod_fields: object, dotted: str) -> JSON:
    """The pod an operator builds from a `resources` site: one main container asking what the
    site says, with the pod-level fields beside it where the kind keeps them."""
    resources = {
        part: operator_resources(value[part], f"{dotted}.{part}") for part in ("requests", "limits") if part in value
    } or {"limits": operator_resources(value, dotted)}
    spec: JSON = {"containers": [{"name": "main", "resources": resources}]}
    if isinstance(pod_fields, dict):
        spec.update({k: pod_fields[k] for k in OPERATOR_POD_FIELDS if k in pod_fields})
        if "draResources" in pod_fields:
            pod_path = dotted.rpartition(".")[0]  # NIM's draResources sit beside its resources
            claims = _nim_claims(pod_fields["draResources"], f"{pod_path}.draResources")
            own = json_list(spec.get("resourceClaims"), f"{pod_path}.resourceClaims")
            spec["resourceClaims"] = [*own, *claims]
    return spec


def _nim_claims(raw: object, dotted: str) -> list[JSON]:
    """The NIM Operator's `draResources` as the pod claims it writes (internal/shared/
    resourceclaims.go): a ResourceClaim by name (one, shared by every pod) or a template (one
    claim per pod). A `claimCreationSpec` is a template the operator makes under a name of its
    own: judged by the claim webhook when it is made, and charged to each pod then."""
    if not isinstance(raw, list):
        raise InputError(dotted, "must be a list of DRA resources")
    claims: list[JSON] = []
    for i, item in enumerate(raw):
        entry = mapping(item, f"{dotted}[{i}]")
        for field in ("resourceClaimName", "resourceClaimTemplateName"):
            name = entry.get(field)
            if name is not None:
                if not isinstance(name, str) or not name:
                    raise InputError(f"{dotted}[{i}].{field}", "must be a name")
                claims.append({"name": f"dra-{i}", field: name})
    return claims


def operator_resources(raw: object, dotted: str) -> dict[str, object]:
    """A resource map as Kubernetes writes it, from an operator's: a bare `gpu` count is of
    `gpuType` (nvidia.com/gpu by default), `custom` holds more (Dynamo, vLLM's production stack);
    a ResourceList passes as it is."""
    items = dict(mapping(raw, dotted))
    custom = items.pop("custom", None)
    gpu_type = items.pop("gpuType", None) or WHOLE_GPU_RESOURCE
    if not isinstance(gpu_type, str):
        raise InputError(f"{dotted}.gpuType", "must be a resource name")
    if "gpu" in items:
        items[gpu_type] = items.pop("gpu")
    if custom is not None:
        items.update(mapping(custom, f"{dotted}.custom"))
    return items


def put_back(raw: JSON, template: Template, pod: JSON) -> JSON:
    """`raw` with the template at `template.found` replaced by what a mutation made of its pod;
    `raw` itself where an operator builds the pods (nothing of the pod goes back to it)."""
    found = template.found
    assert found is not None
    if found.form is Form.RESOURCES:
        return raw
    result = copy.deepcopy(raw)
    parent = result
    for part in found.path[:-1]:
        parent = parent[part]
    site = parent[found.path[-1]]
    original = site.get("metadata") or {}
    # The namespace and name were lent to the pod for judging: they go back only if they were there.
    metadata = {k: v for k, v in pod["metadata"].items() if k not in ("namespace", "name") or k in original}
    spec = pod["spec"]
    if found.form is Form.TEMPLATE:
        site["metadata"], site["spec"] = metadata, spec
    elif found.form is Form.PODSPEC:
        containers = list(spec.get("containers") or [])
        model = model_field(site) if found.model else None
        if model and containers and containers[0].get("name") == KSERVE_CONTAINER:
            # KServe's model is a container (its name is KServe's): all that mutation wrote goes back.
            model_container = containers.pop(0)
            site[model].update({k: v for k, v in model_container.items() if k != "name"})
        site.update({k: v for k, v in spec.items() if k != "containers"})
        if containers or "containers" in site:
            site["containers"] = containers
    else:
        field = "container" if "container" in site else "script"
        site[field] = {**site[field], **spec["containers"][0]}
        site.update({k: spec[k] for k in CONTAINER_SITE_POD_FIELDS if k in spec})
        if metadata:
            site["metadata"] = metadata
    return result


def scaled_to(raw: JSON, replicas: int) -> JSON:
    """A workload as its Scale subresource leaves it: `spec.replicas` (the path of every kind
    whose scale the webhook judges: apps' controllers and LeaderWorkerSet) set to `replicas`."""
    spec = mapping(raw.get("spec"), "spec")
    return {**raw, "spec": {**spec, "replicas": replicas}}
