"""Which MIG profile each whole-GPU container gets, or why it cannot get one: the plan of a pod.

What a policy allows a container depends only on the policy and a few annotation texts
(policies.planning.choices), so it is worked out once per policy set and kept (`PolicySet.cached`);
which of the allowed options is taken depends on the cluster's free capacity at the time, so that
part runs every request; every GPU resource then meets the gate (policies.planning.gate).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from policies.gpu.capacity import Capacity, NoCapacity
from policies.gpu.catalog import Catalog
from policies.gpu.cloud import GKE_ACCELERATOR, GKE_PARTITION
from policies.gpu.models import (
    HAMI_RESOURCES,
    PRODUCT_LABEL,
    SHARED_RESOURCE_SUFFIX,
    WHOLE_GPU_RESOURCE,
    GpuModel,
    Profile,
)
from policies.gpu.placement import CloudPin, admits, cloud_pin, only_shared
from policies.model.policy import GPUPolicy, MigSpec, Strategy
from policies.planning.choices import Choice, KeepWhole, Option, Outcome, ProfileChoice, Refusal, sized
from policies.planning.gate import Device, Gated, named_devices, one_device_each, pin_for
from policies.review.containers import ContainerView
from policies.review.pod import PodView

T = TypeVar("T")


class Cache(Protocol):
    """A value derived from the policy set, kept with it (PolicySet.cached)."""

    def __call__(self, key: Hashable, build: Callable[[], T]) -> T: ...


# Rewrite and MigPlan are made on every review: plain classes, which mypyc compiles to native
# ones built by one C call (a frozen dataclass sets each field through object.__setattr__, in
# Python even in the compiled engine). Never changed once made.


class Rewrite:
    __slots__ = ("container", "profile", "models", "why")

    def __init__(self, container: ContainerView, profile: Profile, models: tuple[GpuModel, ...], why: str) -> None:
        self.container = container
        self.profile = profile
        self.models = models
        self.why = why

    def __repr__(self) -> str:
        return f"Rewrite({self.container.path}, {self.profile.name}, {self.why!r})"


@dataclass(frozen=True, slots=True)
class Problem:
    """A GPU request the policy cannot serve: the validating side denies it with this text."""

    policy: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message} (policy {self.policy})"


class MigPlan:
    __slots__ = ("policy", "rewrites", "problems", "warnings", "pin", "pin_why", "gke")

    def __init__(
        self,
        policy: GPUPolicy | None,
        rewrites: tuple[Rewrite, ...] = (),
        problems: tuple[Problem, ...] = (),
        warnings: tuple[str, ...] = (),
        pin: tuple[str, ...] = (),  # mixed strategy: product labels the pod must land on (policies.planning.gate)
        pin_why: str = "",
        gke: bool = False,  # pinned to a GKE accelerator: slices are GKE's partitions (policies.gpu.cloud)
    ) -> None:
        self.policy = policy
        self.rewrites = rewrites
        self.problems = problems
        self.warnings = warnings
        self.pin = pin
        self.pin_why = pin_why
        self.gke = gke

    @property
    def models(self) -> tuple[GpuModel, ...]:
        """The deciding policy's GPU models."""
        return self.policy.mig.gpu_models if self.policy and self.policy.mig else ()

    @property
    def strategy(self) -> Strategy:
        return self.policy.mig.strategy if self.policy and self.policy.mig else Strategy.MIXED


_SAID = {"observed": "observed by NVIDIA"}  # how a catalog figure's source is said


def _uncached(key: Hashable, build: Callable[[], T]) -> T:
    return build()


class MigPlanner:
    def __init__(
        self,
        policy: GPUPolicy,
        spec: MigSpec,
        catalog: Catalog,
        cache: Cache = _uncached,
        capacity: Capacity | None = None,
    ):
        self.policy = policy
        self.spec = spec
        self.catalog = catalog
        self.cache = cache
        self.capacity = capacity or NoCapacity()
        self.choice = ProfileChoice(spec, catalog)

    def plan(self, pod: PodView, added: tuple[str, ...] = ()) -> MigPlan:
        """`added`: profiles of slices the mutation adds besides the pod's (the Triton sidecar's)."""
        rewrites: list[Rewrite] = []
        problems: list[Problem] = []
        warnings: list[str] = []
        sharing = shares_devices(pod, self.catalog)
        pin = cloud_pin(pod.placement)
        unsplittable = _unsplittable(pin)
        pinned = tuple(self.catalog.model(k) for k in pin.models) if pin and not unsplittable else ()
        gke = bool(pin and pin.key == GKE_ACCELERATOR and pinned)  # GKE's own partitions, not GFD's resources
        for container in pod.all_containers:
            if not container.wants_whole_gpu:
                continue
            if sharing:
                warnings.append(f"{container.name}: not turned into a MIG slice: {sharing}")
                continue
            outcome, fitting = self.outcome(pod, container, pinned)
            if outcome is not None and unsplittable:
                warnings.append(f"{container.name}: not turned into a MIG slice: {unsplittable}")
                continue
            if isinstance(outcome, Refusal):
                problems.append(Problem(self.policy.name, f"{container.path}.resources", outcome.reason))
            elif isinstance(outcome, KeepWhole):
                warnings.append(f"{container.name}: {outcome.reason}")
            elif outcome is not None and fitting is not None:
                if isinstance(fitting, Refusal):
                    problems.append(Problem(self.policy.name, f"{container.path}.resources", fitting.reason))
                else:
                    rewrites.append(self.pick(container, fitting, warnings, bool(pinned), gke))
        if self.spec.strategy is Strategy.SINGLE and rewrites and not gke:
            problems.extend(self.single_strategy_conflicts(pod, tuple(rewrites)))
        gated = self.gate(pod, rewrites, added, gke)
        problems.extend(Problem(self.policy.name, path, reason) for path, reason in gated.problems)
        if (self.spec.strategy is Strategy.SINGLE or gke) and len({r.profile.name for r in rewrites}) > 1:
            names = ", ".join(sorted({f"{r.container.name}={r.profile.name}" for r in rewrites}))
            how = "a GKE node pool" if gke else "single strategy"
            split = f"{how} splits every GPU of a node the same way; containers ask for {names}"
            problems.append(Problem(self.policy.name, "spec", split))
            rewrites = []
        why = ", ".join(m.key for m in gated.pin_models)
        pin_why = f"slices of {why}"
        return MigPlan(self.policy, tuple(rewrites), tuple(problems), tuple(warnings), gated.pin, pin_why, gke)

    def gate(self, pod: PodView, rewrites: list[Rewrite], added: tuple[str, ...] = (), gke: bool = False) -> Gated:
        """Every GPU resource the pod names, under this policy's profiles and models, and the pin
        that makes the mixed-strategy slices land (and weigh) where the policy picked. It depends
        on a few names per container only: worked out once per policy set and shape (cached)."""
        key = (
            "gate",
            self.policy.name,
            tuple((c.init, c.position, tuple(c.gpus.items())) for c in pod.all_containers if c.gpus),
            tuple((r.container.init, r.container.position, r.profile.name, r.models) for r in rewrites),
            pod.annotation("gpu-model"),
            pod.placement,
            added,
            gke,
        )
        return self.cache(key, lambda: self.gated(pod, rewrites, added, gke))

    def gated(self, pod: PodView, rewrites: list[Rewrite], added: tuple[str, ...], gke: bool = False) -> Gated:
        key = pod.annotation("gpu-model")
        picked = self.choice.candidate_models(key) if key else ()
        picked = () if isinstance(picked, Refusal) else picked
        devices: list[Device] = []
        problems: list[tuple[str, str]] = []
        for container in pod.all_containers:
            named, refused = named_devices(container, self.spec, self.catalog, picked)
            devices.extend(named)
            problems.extend(refused)
        problems.extend(one_device_each(pod.all_containers, frozenset(id(r.container) for r in rewrites)))
        if self.spec.strategy is Strategy.SINGLE or gke:
            return Gated(tuple(problems))
        devices.extend(Device(r.container, r.profile.name, r.models) for r in rewrites)
        for profile in added:
            offering = self.catalog.models_with(profile)
            devices.append(Device(None, profile, tuple(m for m in self.spec.gpu_models if m in offering) or offering))
        pinned = pin_for(devices, pod.placement, self.catalog)
        return Gated((*problems, *pinned.problems), pinned.pin, pinned.pin_models)

    def outcome(
        self, pod: PodView, container: ContainerView, pinned: tuple[GpuModel, ...] = ()
    ) -> tuple[Outcome, Choice | Refusal | None]:
        """What the policy allows the container, and the options of it whose real memory covers
        the need (sized). Both are worked out once per policy set and shape; the sizing too
        while no node reports real memory (it reads the catalog's figures alone then)."""
        explicit = pod.annotation(f"mig-profile.{container.name}") or pod.annotation("mig-profile")
        memory_text = pod.annotation("gpu-memory")
        model_key = pod.annotation("gpu-model")
        requests = container.requests.get(WHOLE_GPU_RESOURCE)
        limits = container.limits.get(WHOLE_GPU_RESOURCE)
        key = ("mig", self.policy.name, explicit, memory_text, model_key, requests, limits, pinned)
        outcome = self.cache(
            key, lambda: self.choice.decide(explicit, memory_text, model_key, requests, limits, pinned)
        )
        if self.capacity.known:  # a node's GFD label may give a profile's real memory: sized now
            return outcome, self._sized(outcome)
        return outcome, self.cache(("sized", *key), lambda: self._sized(outcome))

    def _sized(self, outcome: Outcome) -> Choice | Refusal | None:
        return sized(outcome, self.memory_of) if isinstance(outcome, Choice) else None

    def memory_of(self, model: GpuModel, profile: Profile) -> tuple[int, str]:
        """Real memory of a profile: as the cluster reports it (a GFD node label, or a DRA device's memory
        capacity), else the catalog's."""
        if self.capacity.known:
            labelled = self.capacity.memory_mib(model.key, profile.name)
            if labelled is not None:
                return labelled, "as the cluster reports it"
        mib, source = profile.real_memory_mib()
        return mib, _SAID.get(source, source)

    def pick(
        self, container: ContainerView, choice: Choice, warnings: list[str], pinned: bool = False, gke: bool = False
    ) -> Rewrite:
        """The first option with free capacity on one of its models; the best one if none has any.
        `pinned`: the pod's own cloud label chose the models; `gke`: slices are GKE partitions,
        each one nvidia.com/gpu of a pool split into it."""
        if not self.capacity.known:
            best = choice.options[0]
            if choice.need is not None and not self.spec.gpu_models and not pinned:
                warnings.append(
                    f"{container.name}: sized against every MIG-capable model (no GPU nodes known and no "
                    f"mig.gpuModels): {best.profile.name} of {best.models[0].key}"
                )
            return Rewrite(container, best.profile, best.models, _why(choice, best))
        choice = self.in_cluster(choice)
        best = choice.options[0]
        single = self.spec.strategy is Strategy.SINGLE or gke
        for option in choice.options:
            resource = WHOLE_GPU_RESOURCE if single else option.profile.resource
            free = tuple(m for m in option.models if self.capacity.free(m.key, option.profile.name, resource))
            if free:
                if option is not best or len(free) < len(option.models):
                    why = f"{_why(choice, option)}; free capacity on {', '.join(m.key for m in free)}"
                    return Rewrite(container, option.profile, free, why)
                return Rewrite(container, option.profile, option.models, _why(choice, option))
        warnings.append(f"{container.name}: no free {best.profile.name} slice in the cluster now; the pod will wait")
        return Rewrite(container, best.profile, best.models, _why(choice, best))

    def in_cluster(self, choice: Choice) -> Choice:
        """Without the policy's own gpuModels every catalog model was sized: only those the
        cluster has nodes of are offered (all of them where it has none of any)."""
        if self.spec.gpu_models:
            return choice
        kept = []
        for option in choice.options:
            models = tuple(m for m in option.models if self.capacity.has_model(m.key))
            if models:
                kept.append(replace(option, models=models))
        return replace(choice, options=tuple(kept)) if kept else choice

    def single_strategy_conflicts(self, pod: PodView, rewrites: tuple[Rewrite, ...]) -> list[Problem]:
        """Node constraints of the pod's own that reach none of the MIG nodes needed."""
        labels = single_strategy_labels(rewrites)
        kinds = (self.catalog.node_kind(label) for label in labels)
        if any(kind is not None and admits(pod.placement, kind, self.catalog) for kind in kinds):
            return []
        needs = f"this pod needs one of {', '.join(labels[:4])}{', ...' if len(labels) > 4 else ''}"
        selected = pod.node_selector.get(PRODUCT_LABEL)
        if selected is not None:
            return [Problem(self.policy.name, f"spec.nodeSelector.{PRODUCT_LABEL}", f"selects {selected}, but {needs}")]
        return [Problem(self.policy.name, "spec.affinity", f"node affinity reaches no node it needs: {needs}")]


def shares_devices(pod: PodView, catalog: Catalog) -> str:
    """Why the pod's whole GPUs belong to another GPU-sharing system ("" if they do not): its
    GPUs are that system's to give, so no MIG slice is put in their place (what it can get is
    still charged, and its named slices still meet the gate)."""
    names = {name for c in pod.all_containers for name in c.gpus}
    if not HAMI_RESOURCES.isdisjoint(names):
        return "it asks for HAMi's GPU shares"
    if any(name.endswith(SHARED_RESOURCE_SUFFIX) for name in names):
        return "it asks for time-sliced replicas"
    if only_shared(pod.placement, catalog):
        return "it may run only on time-sliced or MPS nodes"
    return ""


def _unsplittable(pin: CloudPin | None) -> str:
    """Why a cloud label's pin leaves no MIG slice to turn a whole GPU into ("" if it does not)."""
    if pin is None:
        return ""
    if pin.partition is not None:
        return f"it asks for GKE's {pin.partition} partitions ({GKE_PARTITION}), each one nvidia.com/gpu"
    if not pin.models:
        return f"it is pinned to {', '.join(pin.values)} ({pin.key}), a GPU without MIG"
    return ""


def _why(choice: Choice, option: Option) -> str:
    return f"{choice.why}, {option.sized}" if option.sized else choice.why


def single_strategy_labels(rewrites: tuple[Rewrite, ...]) -> tuple[str, ...]:
    """nvidia.com/gpu.product values of the nodes that can serve these rewrites under single strategy."""
    labels: dict[str, None] = {}
    for rewrite in rewrites:
        for model in rewrite.models:
            labels.update(dict.fromkeys(model.single_strategy_labels(rewrite.profile, legacy=True)))
    return tuple(labels)
