"""What a pod holds, in the units quotas count: GPU-equivalents, slices per profile, whole GPUs, pods.

Effective requests follow the scheduler: per resource, the larger of the regular containers'
sum (with native sidecars) and each init container's own need (with the sidecars started before it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from policies.gpu.catalog import WHOLE_GPU_RESOURCE, Catalog, GpuModel
from policies.pod import ContainerView, PodView


@dataclass(frozen=True, slots=True)
class Usage:
    gpu_equivalents: Fraction = Fraction(0)
    slices: Mapping[str, int] = field(default_factory=dict)
    gpus: int = 0
    pods: int = 0

    def __add__(self, other: Usage) -> Usage:
        # Most sums on the admission path have an empty side (no reservation, no pods yet);
        # Fraction arithmetic costs microseconds a step.
        if other.is_zero:
            return self
        if self.is_zero:
            return other
        slices = dict(self.slices)
        for name, count in other.slices.items():
            slices[name] = slices.get(name, 0) + count
        return Usage(
            self.gpu_equivalents + other.gpu_equivalents, slices, self.gpus + other.gpus, self.pods + other.pods
        )

    def __sub__(self, other: Usage) -> Usage:
        if other.is_zero:
            return self
        slices = {name: count - other.slices.get(name, 0) for name, count in self.slices.items()}
        return Usage(
            self.gpu_equivalents - other.gpu_equivalents,
            {k: v for k, v in slices.items() if v},
            self.gpus - other.gpus,
            self.pods - other.pods,
        )

    def times(self, factor: int) -> Usage:
        return Usage(
            self.gpu_equivalents * factor,
            {k: v * factor for k, v in self.slices.items()},
            self.gpus * factor,
            self.pods * factor,
        )

    @property
    def empty(self) -> bool:
        return self.pods == 0

    @property
    def is_zero(self) -> bool:
        return not (self.pods or self.gpus or self.gpu_equivalents or self.slices)


EMPTY = Usage()


def _gpu_amounts(container: ContainerView) -> dict[str, Decimal]:
    amounts = container.mig_resources()
    whole = container.amount(WHOLE_GPU_RESOURCE)
    if whole is not None:
        amounts[WHOLE_GPU_RESOURCE] = whole
    return amounts


def effective_gpu_requests(pod: PodView) -> dict[str, Decimal]:
    """Per GPU resource name, what the scheduler reserves for the pod."""
    regular: dict[str, Decimal] = {}
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for container in pod.init_containers:
        amounts = _gpu_amounts(container)
        if container.restart_always:
            for name, amount in amounts.items():
                sidecars[name] = sidecars.get(name, Decimal(0)) + amount
            continue
        for name, amount in amounts.items():
            need = amount + sidecars.get(name, Decimal(0))
            peak[name] = max(peak.get(name, Decimal(0)), need)
    for container in pod.containers:
        for name, amount in _gpu_amounts(container).items():
            regular[name] = regular.get(name, Decimal(0)) + amount
    for name, amount in sidecars.items():
        regular[name] = regular.get(name, Decimal(0)) + amount
    names = regular.keys() | peak.keys()
    return {n: max(regular.get(n, Decimal(0)), peak.get(n, Decimal(0))) for n in names}


def gpus_held(pod: PodView) -> tuple[tuple[str, int], ...]:
    """(GPU resource, whole units) the scheduler reserves for the pod, the ones it holds at all."""
    return tuple(sorted((name, int(amount)) for name, amount in effective_gpu_requests(pod).items() if amount > 0))


def pod_usage(pod: PodView, catalog: Catalog, preferred: tuple[GpuModel, ...] = ()) -> Usage:
    """Usage of one pod; profile weights on the pod's model (annotation, node label) or `preferred`."""
    amounts = effective_gpu_requests(pod)
    amounts = {name: amount for name, amount in amounts.items() if amount > 0}
    if not amounts:
        return EMPTY
    models = _model_hint(pod, catalog) or preferred
    slices: dict[str, int] = {}
    gpus = 0
    for name, amount in amounts.items():
        count = int(amount)
        if name == WHOLE_GPU_RESOURCE:
            single = _single_strategy_profile(pod, catalog)
            if single is None:
                gpus += count
            else:
                slices[single] = slices.get(single, 0) + count
        else:
            profile = catalog.profile_for_resource(name)
            if profile is not None:
                slices[profile] = slices.get(profile, 0) + count
    # Summed over a common denominator in ints, one Fraction at the end: each Fraction operator
    # makes and normalizes a Fraction of its own, microseconds a step.
    numerator, denominator = gpus, 1
    for profile, count in slices.items():
        weight = catalog.weight(profile, models)
        numerator = numerator * weight.denominator + count * weight.numerator * denominator
        denominator *= weight.denominator
    return Usage(Fraction(numerator, denominator), slices, gpus, 1)


def _model_hint(pod: PodView, catalog: Catalog) -> tuple[GpuModel, ...]:
    key = pod.annotation("gpu-model")
    if key and catalog.has_model(key):
        return (catalog.model(key),)
    models: dict[GpuModel, None] = {}
    for label in pod.required_products:
        found = catalog.from_product_label(label)
        if found:
            models[found[0]] = None
    return tuple(models)


def _single_strategy_profile(pod: PodView, catalog: Catalog) -> str | None:
    for label in pod.required_products:
        found = catalog.from_product_label(label)
        if found and found[1] is not None:
            return found[1].name
    return None


def counts_against_quota(pod: PodView) -> bool:
    """Succeeded and Failed pods free their share; pods being deleted still hold theirs."""
    return pod.phase not in ("Succeeded", "Failed")
