"""Which MIG profile each whole-GPU container gets, or why it cannot get one.

Order of choice: `mig-profile.<container>`, `mig-profile`, the smallest profile whose memory
covers `gpu-memory`, the policy's `defaultProfile`. Models come from `gpu-model` or the
policy's `gpuModels` (in order of preference). One MIG device per container: N > 1 whole
GPUs are never turned into N slices.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from policies.catalog import PRODUCT_LABEL, WHOLE_GPU_RESOURCE, Catalog, CatalogError, GpuModel, Profile
from policies.fields import QuantityParser
from policies.model import GPUPolicy, MigSpec, MultiGpu, Strategy
from policies.pod import ContainerView, PodView

GIB = Decimal(2**30)


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


class _Unservable(Exception):
    pass


def _gib(memory: Decimal) -> str:
    return f"{(memory / GIB).normalize():f}Gi"


class MigPlanner:
    def __init__(self, policy: GPUPolicy, spec: MigSpec, catalog: Catalog, parse_quantity: QuantityParser):
        self.policy = policy
        self.spec = spec
        self.catalog = catalog
        self.parse_quantity = parse_quantity

    def plan(self, pod: PodView) -> MigPlan:
        rewrites: list[Rewrite] = []
        problems: list[Problem] = []
        warnings: list[str] = []
        for container in pod.all_containers:
            if not container.wants_whole_gpu:
                continue
            path = f"{container.path}.resources"
            try:
                rewrite = self.choose(pod, container)
            except _Unservable as reason:
                problems.append(Problem(self.policy.name, path, str(reason)))
                continue
            except _KeepWhole as reason:
                warnings.append(f"{container.name}: {reason}")
                continue
            if rewrite is not None:
                rewrites.append(rewrite)
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

    def single_strategy_conflicts(self, pod: PodView, rewrites: tuple[Rewrite, ...]) -> list[Problem]:
        """A nodeSelector the user pinned to another product can never land on the MIG nodes needed."""
        selected = pod.node_selector.get(PRODUCT_LABEL)
        labels = single_strategy_labels(rewrites)
        if selected is None or selected in labels:
            return []
        path = f"spec.nodeSelector.{PRODUCT_LABEL}"
        return [Problem(self.policy.name, path, f"selects {selected}, but this pod needs one of {', '.join(labels)}")]

    def candidate_models(self, pod: PodView) -> tuple[GpuModel, ...]:
        key = pod.annotation("gpu-model")
        if key is None:
            return self.spec.gpu_models
        try:
            model = self.catalog.model(key)
        except CatalogError as error:
            raise _Unservable(f"gpu-model annotation: {error}") from None
        if self.spec.gpu_models and model not in self.spec.gpu_models:
            allowed = ", ".join(m.key for m in self.spec.gpu_models)
            raise _Unservable(f"gpu-model {key} is not allowed here (allowed: {allowed})")
        return (model,)

    def choose(self, pod: PodView, container: ContainerView) -> Rewrite | None:
        count = self.gpu_count(container)
        explicit = pod.annotation(f"mig-profile.{container.name}") or pod.annotation("mig-profile")
        memory_text = pod.annotation("gpu-memory")
        models = self.candidate_models(pod)
        if count != 1:
            if explicit or memory_text:
                raise _Unservable(
                    f"asks for {count} GPUs and a MIG slice; a container can use only one MIG device, "
                    "so ask for nvidia.com/gpu: 1 per container"
                )
            if self.spec.multi_gpu is MultiGpu.DENY:
                raise _Unservable(f"asks for {count} whole GPUs; this policy allows only one MIG slice per container")
            raise _KeepWhole(f"keeps {count} whole GPUs (one MIG device per container)")
        if explicit:
            return self.named(explicit, models, f"mig-profile annotation {explicit}", container)
        if memory_text:
            return self.by_memory(memory_text, models, container)
        if self.spec.default_profile:
            return self.named(self.spec.default_profile, models, "policy defaultProfile", container)
        return None

    def gpu_count(self, container: ContainerView) -> Decimal:
        requests = container.requests.get(WHOLE_GPU_RESOURCE)
        limits = container.limits.get(WHOLE_GPU_RESOURCE)
        if requests is not None and limits is not None and requests != limits:
            raise _Unservable(f"nvidia.com/gpu requests ({requests}) must equal limits ({limits})")
        count = limits if limits is not None else requests
        assert count is not None
        if count != count.to_integral_value() or count < 1:
            raise _Unservable(f"nvidia.com/gpu must be a whole number of 1 or more, not {count}")
        return count

    def named(self, name: str, models: tuple[GpuModel, ...], why: str, container: ContainerView) -> Rewrite:
        if not self.spec.allows(name):
            raise _Unservable(
                f"profile {name} is not allowed (allowed: {', '.join(sorted(self.spec.allowed_profiles))})"
            )
        pool = models or self.catalog.models_with(name)
        try:
            self.catalog.check_profile(name, pool)
        except CatalogError as error:
            raise _Unservable(str(error)) from None
        having = tuple(m for m in pool if m.profile(name) is not None)
        profile = having[0].profile(name)
        assert profile is not None
        return Rewrite(container, profile, having, why)

    def by_memory(self, text: str, models: tuple[GpuModel, ...], container: ContainerView) -> Rewrite:
        try:
            need = self.parse_quantity(text)
        except (ValueError, TypeError, ArithmeticError):
            raise _Unservable(f"gpu-memory {text!r} is not a Kubernetes quantity (e.g. 15Gi)") from None
        if not models:
            raise _Unservable(
                "gpu-memory needs a GPU model to size against: set gpu-model or the policy's mig.gpuModels"
            )
        pool = models
        best: tuple[Profile, GpuModel] | None = None
        for model in pool:
            fitting = [
                p for p in model.profiles if not p.is_variant and self.spec.allows(p.name) and p.memory_gb * GIB >= need
            ]
            if fitting:
                best = (min(fitting, key=lambda p: (p.memory_gb, p.g)), model)
                break
        if best is None:
            where = ", ".join(m.key for m in models)
            raise _Unservable(f"no allowed MIG profile of {where} has {_gib(need)} of memory")
        profile, _ = best
        having = tuple(m for m in pool if (p := m.profile(profile.name)) is not None and p.memory_gb * GIB >= need)
        return Rewrite(container, profile, having, f"gpu-memory {text}")


class _KeepWhole(Exception):
    pass


def single_strategy_labels(rewrites: tuple[Rewrite, ...]) -> tuple[str, ...]:
    """nvidia.com/gpu.product values of the nodes that can serve these rewrites under single strategy."""
    labels: dict[str, None] = {}
    for rewrite in rewrites:
        for model in rewrite.models:
            labels.update(dict.fromkeys(model.single_strategy_labels(rewrite.profile)))
    return tuple(labels)
