"""Which MIG profile each whole-GPU container gets, or why it cannot get one.

Order of choice: `mig-profile.<container>`, `mig-profile`, the smallest profile whose memory
covers `gpu-memory`, the policy's `defaultProfile`. Models come from `gpu-model` or the
policy's `gpuModels` (in order of preference). One MIG device per container: N > 1 whole
GPUs are never turned into N slices.

What a policy allows a container depends only on the policy and a few annotation texts, so it
is worked out once per policy set and kept (`PolicySet.cached`); which of the allowed options
is taken depends on the cluster's free capacity at the time, so that part runs every request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeVar

from policies.gpu.capacity import Capacity, NoCapacity
from policies.gpu.catalog import PRODUCT_LABEL, WHOLE_GPU_RESOURCE, Catalog, CatalogError, GpuModel, Profile
from policies.model.policy import GPUPolicy, MigSpec, MultiGpu, Strategy
from policies.pod import ContainerView, PodView
from policies.quantity import QuantityParser

GIB = Decimal(2**30)
T = TypeVar("T")
Cache = Callable[[object, Callable[[], T]], T]


@dataclass(frozen=True, slots=True)
class Option:
    """One profile a container may get, and the models (in preference order) that offer it."""

    profile: Profile
    models: tuple[GpuModel, ...]


@dataclass(frozen=True, slots=True)
class Choice:
    """The options a policy allows a container, best first, and why it gets a slice at all."""

    options: tuple[Option, ...]
    why: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request the policy cannot serve: denied by the validating side with this reason."""

    reason: str


@dataclass(frozen=True, slots=True)
class KeepWhole:
    """N > 1 whole GPUs under `multiGpu: keep`: left as they are, with a warning."""

    reason: str


Outcome = Choice | Refusal | KeepWhole | None


@dataclass(frozen=True, slots=True)
class Rewrite:
    container: ContainerView
    profile: Profile
    models: tuple[GpuModel, ...]
    why: str


@dataclass(frozen=True, slots=True)
class Problem:
    """A GPU request the policy cannot serve: the validating side denies it with this text."""

    policy: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message} (policy {self.policy})"


@dataclass(frozen=True, slots=True)
class MigPlan:
    policy: GPUPolicy | None
    rewrites: tuple[Rewrite, ...] = ()
    problems: tuple[Problem, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def models(self) -> tuple[GpuModel, ...]:
        """The deciding policy's GPU models, which weigh slices for quotas."""
        return self.policy.mig.gpu_models if self.policy and self.policy.mig else ()

    @property
    def strategy(self) -> Strategy:
        return self.policy.mig.strategy if self.policy and self.policy.mig else Strategy.MIXED


def _gib(memory: Decimal) -> str:
    return f"{(memory / GIB).normalize():f}Gi"


def _uncached(key: object, build: Callable[[], T]) -> T:
    return build()


class MigPlanner:
    def __init__(
        self,
        policy: GPUPolicy,
        spec: MigSpec,
        catalog: Catalog,
        parse_quantity: QuantityParser,
        cache: Cache[Outcome] = _uncached,
        capacity: Capacity | None = None,
    ):
        self.policy = policy
        self.spec = spec
        self.catalog = catalog
        self.parse_quantity = parse_quantity
        self.cache = cache
        self.capacity = capacity or NoCapacity()

    def plan(self, pod: PodView) -> MigPlan:
        rewrites: list[Rewrite] = []
        problems: list[Problem] = []
        warnings: list[str] = []
        for container in pod.all_containers:
            if not container.wants_whole_gpu:
                continue
            outcome = self.outcome(pod, container)
            if isinstance(outcome, Refusal):
                problems.append(Problem(self.policy.name, f"{container.path}.resources", outcome.reason))
            elif isinstance(outcome, KeepWhole):
                warnings.append(f"{container.name}: {outcome.reason}")
            elif outcome is not None:
                rewrites.append(self.pick(container, outcome, warnings))
        if self.spec.strategy is Strategy.SINGLE and rewrites:
            problems.extend(self.single_strategy_conflicts(pod, tuple(rewrites)))
        if self.spec.strategy is Strategy.SINGLE and len({r.profile.name for r in rewrites}) > 1:
            names = ", ".join(sorted({f"{r.container.name}={r.profile.name}" for r in rewrites}))
            problems.append(
                Problem(
                    self.policy.name,
                    "spec",
                    f"single strategy splits every GPU of a node the same way; containers ask for {names}",
                )
            )
            rewrites = []
        return MigPlan(self.policy, tuple(rewrites), tuple(problems), tuple(warnings))

    def outcome(self, pod: PodView, container: ContainerView) -> Outcome:
        explicit = pod.annotation(f"mig-profile.{container.name}") or pod.annotation("mig-profile")
        memory_text = pod.annotation("gpu-memory")
        model_key = pod.annotation("gpu-model")
        requests = container.requests.get(WHOLE_GPU_RESOURCE)
        limits = container.limits.get(WHOLE_GPU_RESOURCE)
        key = ("mig", self.policy.name, explicit, memory_text, model_key, requests, limits)
        return self.cache(key, lambda: self.decide(explicit, memory_text, model_key, requests, limits))

    def pick(self, container: ContainerView, choice: Choice, warnings: list[str]) -> Rewrite:
        """The first option with free capacity on one of its models; the best one if none has any."""
        best = choice.options[0]
        if not self.capacity.known:
            return Rewrite(container, best.profile, best.models, choice.why)
        single = self.spec.strategy is Strategy.SINGLE
        for option in choice.options:
            resource = WHOLE_GPU_RESOURCE if single else option.profile.resource
            free = tuple(m for m in option.models if self.capacity.free(m.key, option.profile.name, resource))
            if free:
                if option is not best or len(free) < len(option.models):
                    why = f"{choice.why}; free capacity on {', '.join(m.key for m in free)}"
                    return Rewrite(container, option.profile, free, why)
                return Rewrite(container, option.profile, option.models, choice.why)
        warnings.append(f"{container.name}: no free {best.profile.name} slice in the cluster now; the pod will wait")
        return Rewrite(container, best.profile, best.models, choice.why)

    def single_strategy_conflicts(self, pod: PodView, rewrites: tuple[Rewrite, ...]) -> list[Problem]:
        """A nodeSelector the user pinned to another product can never land on the MIG nodes needed."""
        selected = pod.node_selector.get(PRODUCT_LABEL)
        labels = single_strategy_labels(rewrites)
        if selected is None or selected in labels:
            return []
        path = f"spec.nodeSelector.{PRODUCT_LABEL}"
        return [Problem(self.policy.name, path, f"selects {selected}, but this pod needs one of {', '.join(labels)}")]

    # -- what the policy allows, from the annotations alone (cached) ------------------------------
    def decide(
        self,
        explicit: str | None,
        memory_text: str | None,
        model_key: str | None,
        requests: Decimal | None,
        limits: Decimal | None,
    ) -> Outcome:
        if requests is not None and limits is not None and requests != limits:
            return Refusal(f"nvidia.com/gpu requests ({requests}) must equal limits ({limits})")
        count = limits if limits is not None else requests
        assert count is not None
        if count != count.to_integral_value() or count < 1:
            return Refusal(f"nvidia.com/gpu must be a whole number of 1 or more, not {count}")
        models = self.candidate_models(model_key)
        if isinstance(models, Refusal):
            return models
        if count != 1:
            if explicit or memory_text:
                return Refusal(
                    f"asks for {count} GPUs and a MIG slice; a container can use only one MIG device, "
                    "so ask for nvidia.com/gpu: 1 per container"
                )
            if self.spec.multi_gpu is MultiGpu.DENY:
                return Refusal(f"asks for {count} whole GPUs; this policy allows only one MIG slice per container")
            return KeepWhole(f"keeps {count} whole GPUs (one MIG device per container)")
        if explicit:
            return self.named(explicit, models, f"mig-profile annotation {explicit}")
        if memory_text:
            return self.by_memory(memory_text, models)
        if self.spec.default_profile:
            return self.named(self.spec.default_profile, models, "policy defaultProfile")
        return None

    def candidate_models(self, key: str | None) -> tuple[GpuModel, ...] | Refusal:
        if key is None:
            return self.spec.gpu_models
        try:
            model = self.catalog.model(key)
        except CatalogError as error:
            return Refusal(f"gpu-model annotation: {error}")
        if self.spec.gpu_models and model not in self.spec.gpu_models:
            allowed = ", ".join(m.key for m in self.spec.gpu_models)
            return Refusal(f"gpu-model {key} is not allowed here (allowed: {allowed})")
        return (model,)

    def named(self, name: str, models: tuple[GpuModel, ...], why: str) -> Choice | Refusal:
        if not self.spec.allows(name):
            return Refusal(f"profile {name} is not allowed (allowed: {', '.join(sorted(self.spec.allowed_profiles))})")
        pool = models or self.catalog.models_with(name)
        try:
            self.catalog.check_profile(name, pool)
        except CatalogError as error:
            return Refusal(str(error))
        having = tuple(m for m in pool if m.profile(name) is not None)
        profile = having[0].profile(name)
        assert profile is not None
        return Choice((Option(profile, having),), why)

    def by_memory(self, text: str, models: tuple[GpuModel, ...]) -> Choice | Refusal:
        """Every allowed profile that covers the need: the preferred model's smallest first."""
        try:
            need = self.parse_quantity(text)
        except (ValueError, TypeError, ArithmeticError):
            return Refusal(f"gpu-memory {text!r} is not a Kubernetes quantity (e.g. 15Gi)")
        if not models:
            return Refusal("gpu-memory needs a GPU model to size against: set gpu-model or the policy's mig.gpuModels")
        fitting = [
            sorted(
                (p for p in m.profiles if not p.is_variant and self.spec.allows(p.name) and p.memory_gb * GIB >= need),
                key=lambda p: (p.memory_gb, p.g),
            )
            for m in models
        ]
        # The right-sized slice on any allowed model comes before a bigger slice on the preferred one.
        options: dict[str, tuple[Profile, list[GpuModel]]] = {}
        for rank in range(max(map(len, fitting))):
            for model, profiles in zip(models, fitting, strict=True):
                if rank < len(profiles):
                    options.setdefault(profiles[rank].name, (profiles[rank], []))[1].append(model)
        if not options:
            where = ", ".join(m.key for m in models)
            return Refusal(f"no allowed MIG profile of {where} has {_gib(need)} of memory")
        return Choice(tuple(Option(p, tuple(ms)) for p, ms in options.values()), f"gpu-memory {text}")


def single_strategy_labels(rewrites: tuple[Rewrite, ...]) -> tuple[str, ...]:
    """nvidia.com/gpu.product values of the nodes that can serve these rewrites under single strategy."""
    labels: dict[str, None] = {}
    for rewrite in rewrites:
        for model in rewrite.models:
            labels.update(dict.fromkeys(model.single_strategy_labels(rewrite.profile)))
    return tuple(labels)
