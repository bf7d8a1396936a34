"""One gate for every GPU resource a container asks for, rewritten by the webhook or named by the
pod, and where the pod must be pinned so that what it holds weighs what it is charged.

- A MIG resource the catalog does not know is refused with the closest names (never charged zero).
- `allowedProfiles` and `gpuModels` hold for named slices as for rewritten ones; a `.shared`
  replica is judged by the profile it shares.
- One MIG device per container: CUDA uses only one (k8s-device-plugin issue 728).
- Mixed strategy: where the pod may land on models the policy (or the `gpu-model` annotation)
  did not pick for a slice, or where the same slice name weighs differently on the models it may
  land on, the pod is pinned to the picked models' nodes (their `nvidia.com/gpu.product`
  labels, time-sliced ones included), so the scheduler enforces the choice and the charge is
  the weight the slice really has.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.gpu.catalog import Catalog, ResourceKind
from policies.gpu.models import MIG_RESOURCE_PREFIX, GpuModel
from policies.gpu.placement import Placement, admits, families
from policies.model.policy import MigSpec
from policies.review.containers import ContainerView

# After the count of MIG devices a container asks for, in the webhook's words and the native gate's.
ONE_DEVICE = "; a container can use only one (CUDA uses one MIG device per process): use one container per slice"


@dataclass(frozen=True, slots=True)
class Device:
    """One MIG device a container will hold: its profile and the models it may be served by."""

    container: ContainerView | None  # None: one the mutation adds (the Triton sidecar's)
    profile: str
    models: tuple[GpuModel, ...]


@dataclass(frozen=True, slots=True)
class Gated:
    problems: tuple[tuple[str, str], ...] = ()  # (field path, reason)
    pin: tuple[str, ...] = ()  # nvidia.com/gpu.product values the pod must be pinned to
    pin_models: tuple[GpuModel, ...] = ()
    keep_off: tuple[str, ...] = ()  # nvidia.com/gpu.product values it must not land on (nodes without one pass)


def named_devices(
    container: ContainerView, spec: MigSpec, catalog: Catalog, picked: tuple[GpuModel, ...]
) -> tuple[list[Device], list[tuple[str, str]]]:
    """The MIG devices a container names itself, and what the policy refuses about them."""
    devices: list[Device] = []
    problems: list[tuple[str, str]] = []
    for name in container.gpus:
        resource = catalog.resource(name)
        if resource.kind is not ResourceKind.MIG:
            continue
        path = f"{container.path}.resources"
        if resource.profile is None:
            problems.append((path, f"{name}: no GPU has this MIG profile{catalog.closest_resources(resource.written)}"))
            continue
        refused = refusal(resource.profile, spec, catalog, picked)
        if refused is not None:
            problems.append((path, f"{name}: {refused}"))
            continue
        offering = catalog.models_with(resource.profile)
        serving = tuple(m for m in (picked or spec.gpu_models or offering) if m in offering)
        devices.append(Device(container, resource.profile, serving))
    return devices, problems


def refusal(profile: str, spec: MigSpec, catalog: Catalog, picked: tuple[GpuModel, ...] = ()) -> str | None:
    """Why a container may not name a slice of `profile` (a profile the catalog knows) under
    `spec`, with `picked` the models the pod's `gpu-model` annotation picks (always among the
    policy's); None where it may. The native policies refuse the same names with the same words
    (policies.native.mig_gate), read with no models picked: a refusal then holds whatever the pod picks."""
    if not spec.allows(profile):
        return f"profile {profile} is not allowed (allowed: {', '.join(sorted(spec.allowed_profiles))})"
    offering = catalog.models_with(profile)
    if not any(m in offering for m in (picked or spec.gpu_models or offering)):
        return f"profile {profile} is not a profile of {', '.join(m.key for m in (picked or spec.gpu_models))}"
    return None


def one_device_each(containers: tuple[ContainerView, ...], rewritten: frozenset[int]) -> list[tuple[str, str]]:
    """Containers holding more than one MIG device (several of one profile, or several profiles);
    `rewritten`: ids of containers whose nvidia.com/gpu becomes a slice."""
    problems: list[tuple[str, str]] = []
    for container in containers:
        count = sum(int(amount) for name, amount in container.gpus.items() if name.startswith(MIG_RESOURCE_PREFIX))
        count += id(container) in rewritten
        if count > 1:
            problems.append(
                (
                    f"{container.path}.resources",
                    f"asks for {count} MIG devices{ONE_DEVICE}",
                )
            )
    return problems


def pin_for(devices: list[Device], placement: Placement, catalog: Catalog) -> Gated:
    """Where the pod must be pinned so that every device lands on a model picked for it; a
    problem where no model serves them all, or where the pod's own constraints reach none."""
    if not devices:
        return Gated()
    models: tuple[GpuModel, ...] = devices[0].models
    for device in devices[1:]:
        models = tuple(m for m in models if m in device.models)
    profiles = ", ".join(sorted({d.profile for d in devices}))
    if not models:
        return Gated((("spec", f"no single GPU model the policy allows serves all of {profiles}"),))
    labels = tuple(label for model in models for label in model.whole_labels())
    kinds = (catalog.node_kind(label) for label in labels)
    if not any(kind is not None and admits(placement, kind, catalog) for kind in kinds):
        where = ", ".join(m.key for m in models)
        return Gated((("spec.affinity", f"the pod's node constraints reach no {where} node, which {profiles} needs"),))
    needed = any(not set(families(placement, catalog, catalog.models_with(d.profile))) <= set(models) for d in devices)
    return Gated(pin=labels if needed else (), pin_models=models)
