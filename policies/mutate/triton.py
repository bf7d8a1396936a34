"""The Triton Inference Server sidecar, as Triton's own Kubernetes examples run it."""

from __future__ import annotations

from policies.gpu.catalog import Catalog
from policies.gpu.models import WHOLE_GPU_RESOURCE, mixed_resource
from policies.model.policy import GPUPolicy, Strategy, TritonSpec
from policies.mutate.rewrite import steer
from policies.mutate.runtime import SHM_VOLUME, Merged, ensure_shm_volume
from policies.planning.plan import MigPlan, Problem
from policies.planning.sidecar import CONTAINER, no_repository, sidecar_settings, wants_sidecar
from policies.review.containers import SHM_PATH
from policies.review.document import JSON, Change, Draft
from policies.review.pod import PodView

PORTS = (("http", 8000), ("grpc", 8001), ("metrics", 8002))
TRITON_USER = 1000
# Pod Security Standards `restricted`, container level: the sidecar must not be the reason a
# namespace enforcing it turns the pod away (Triton's image runs fine as its uid 1000).
RESTRICTED: dict[str, JSON] = {
    "runAsNonRoot": True,
    "runAsUser": TRITON_USER,
    "runAsGroup": TRITON_USER,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _probe(path: str, **timing: int) -> dict[str, JSON]:
    return {"httpGet": {"path": path, "port": "http"}, **timing}


def sidecar(
    spec: TritonSpec, repository: str, resources: dict[str, str], env: list[dict[str, str]], pod_level: bool = False
) -> dict[str, JSON]:
    """`pod_level`: the pod sets `spec.resources` (Kubernetes 1.34+), which must cover its
    containers' CPU and memory: the sidecar then shares them and asks only for its slice."""
    container: dict[str, JSON] = {
        "name": CONTAINER,
        "image": spec.image,
        "command": ["tritonserver"],
        "args": [f"--model-repository={repository}"],
        "ports": [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in PORTS],
        "livenessProbe": _probe("/v2/health/live", periodSeconds=10),
        "readinessProbe": _probe("/v2/health/ready", periodSeconds=5),
        # Triton's chart: a 5-minute model-load budget before liveness counts.
        "startupProbe": _probe("/v2/health/ready", periodSeconds=10, failureThreshold=30),
        "securityContext": RESTRICTED,
        "volumeMounts": [{"name": SHM_VOLUME, "mountPath": SHM_PATH}],
    }
    # Requests for the scheduler (CPU, memory and the slice), limits for the memory and the slice.
    if not pod_level:
        container["resources"] = {
            "limits": {"memory": spec.memory, **resources},
            "requests": {"cpu": spec.cpu, "memory": spec.memory, **resources},
        }
    elif resources:
        container["resources"] = {"limits": dict(resources), "requests": dict(resources)}
    if env:
        container["env"] = env
    if spec.native_sidecar:
        container["restartPolicy"] = "Always"
    return container


def _single_strategy_slice(
    doc: Draft,
    pod: PodView,
    plan: MigPlan,
    profile: str,
    policy: str,
    changes: list[Change],
    warnings: list[str],
    catalog: Catalog,
) -> None:
    """Under single strategy the sidecar's nvidia.com/gpu is a slice of whatever profile its node
    is split into: the pod's own rewrite decides it; with none, the sidecar steers the pod, unless
    the pod keeps whole GPUs, whose nodes are not split at all."""
    if plan.rewrites or pod.holds_gpu:
        planned = plan.rewrites[0].profile.name if plan.rewrites else "whole-GPU"
        if planned != profile:
            warnings.append(f"{CONTAINER}: gets what its node offers ({planned}), not {profile}: single strategy")
        return
    labels: list[str] = []
    for model in tuple(m for m in plan.models if m.profile(profile)) or catalog.models_with(profile):
        found = model.profile(profile)
        if found is not None:
            labels.extend(model.single_strategy_labels(found))
    steer(doc, tuple(labels), f"triton sidecar profile {profile}", policy, changes)


def inject_triton(
    doc: Draft,
    pod: PodView,
    policies: tuple[GPUPolicy, ...],
    plan: MigPlan,
    merged: Merged | None,
    changes: list[Change],
    problems: list[Problem],
    warnings: list[str],
    catalog: Catalog,
) -> None:
    if not wants_sidecar(pod):
        return
    spec, policy, repository = sidecar_settings(pod, policies)
    if not repository:
        problems.append(no_repository(policy))
        return
    resources: dict[str, str] = {}
    single = plan.strategy is Strategy.SINGLE and plan.policy is not None
    if spec.profile:
        resources[WHOLE_GPU_RESOURCE if single else mixed_resource(spec.profile)] = "1"
    if spec.profile and single:
        _single_strategy_slice(doc, pod, plan, spec.profile, policy, changes, warnings, catalog)
    env = [{"name": k, "value": v} for k, (v, _) in merged.env.items()] if merged and spec.profile else []
    pod_level = isinstance(doc.spec().get("resources"), dict)
    if pod_level:
        warnings.append(
            f"{CONTAINER}: shares the pod's spec.resources (CPU and memory), which must cover it: "
            f"{spec.cpu} CPU and {spec.memory} of its own were not added"
        )
    raw = sidecar(spec, repository, resources, env, pod_level)
    key = "initContainers" if spec.native_sidecar else "containers"
    doc.append(doc.child(doc.spec(), key, list), raw)
    changes.append(Change(f"spec.{key}", f"triton sidecar {spec.image} --model-repository={repository}", policy))
    size = merged.shm_size[0] if merged and merged.shm_size else None
    ensure_shm_volume(doc, size, policy, changes)
