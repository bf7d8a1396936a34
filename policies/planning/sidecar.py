"""The Triton sidecar as planned: whether a pod asks for one, which policy's settings it gets,
the slice it will hold (planned with the pod's own), and why it cannot be added. The mutating side
writes it; the validating side denies on what stops it."""

from __future__ import annotations

from policies.model.policy import GPUPolicy, TritonSpec
from policies.planning.plan import Problem
from policies.review.pod import PodView

CONTAINER = "triton"
BUILT_IN = "(built-in Triton defaults)"


def wants_sidecar(pod: PodView) -> bool:
    """Asked for and not there yet (a pod of its own making, or this webhook's earlier pass)."""
    return pod.annotation("triton") == "inject" and not any(c.name == CONTAINER for c in pod.all_containers)


def sidecar_settings(pod: PodView, policies: tuple[GPUPolicy, ...]) -> tuple[TritonSpec, str, str | None]:
    """The deciding policy's Triton spec, its name, and the model repository to serve."""
    owner = next((p for p in policies if p.triton is not None), None)
    spec = owner.triton if owner and owner.triton else TritonSpec()
    repository = pod.annotation("triton-model-repository") or spec.model_repository
    return spec, owner.name if owner else BUILT_IN, repository


def sidecar_slice(pod: PodView, policies: tuple[GPUPolicy, ...]) -> str | None:
    """The MIG profile of the sidecar this mutation will add, if it adds one with a slice."""
    if not wants_sidecar(pod):
        return None
    spec, _, repository = sidecar_settings(pod, policies)
    return spec.profile if repository else None


def triton_problem(pod: PodView, policies: tuple[GPUPolicy, ...]) -> Problem | None:
    """Why a requested sidecar cannot be added: the mutating side reports it, the validating side
    (which sees the pod after mutation, still without the sidecar) denies on it."""
    if not wants_sidecar(pod):
        return None
    _, policy, repository = sidecar_settings(pod, policies)
    return None if repository else no_repository(policy)


def no_repository(policy: str) -> Problem:
    message = "triton: inject needs gpu-admission.io/triton-model-repository or the policy's triton.modelRepository"
    return Problem(policy, "metadata.annotations", message)
