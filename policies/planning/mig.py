"""Which MIG profile each whole-GPU container gets, or why it cannot get one: the plan of a pod.

What a policy allows a container depends only on the policy and a few annotation texts
(policies.planning.choices), so it is worked out once per policy set and kept (`PolicySet.cached`);
which of the allowed options is taken depends on the cluster's free capacity at the time, so that
part runs every request; every GPU resource then meets the gate (policies.planning.gate).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Protocol, TypeVar

from policies.gpu.capacity import Capacity, NoCapacity
from policies.gpu.catalog import Catalog
from policies.gpu.cloud import GKE_ACCELERATOR, GKE_PARTITION
from policies.gpu.models import (
    HAMI_RESOURCES,
    MIG_RESOURCE_PREFIX,
    PRODUCT_LABEL,
    SHARED_RESOURCE_SUFFIX,
    WHOLE_GPU_RESOURCE,
    GpuModel,
    Profile,
    mixed_resource,
)
from policies.gpu.placement import CloudPin, admits, cloud_pin, only_shared
from policies.model.policy import Backend, DualAdvertised, GPUPolicy, MigSpec, Strategy
from policies.planning.backends import Backends, Via
from policies.planning.choices import Choice, KeepWhole, Option, Outcome, ProfileChoice, Refusal, sized
from policies.planning.gate import Device, Gated, named_devices, one_device_each, pin_for
from policies.planning.plan import MigPlan, Problem, Rewrite, single_strategy_labels
from policies.review.containers import ContainerView
from policies.review.pod import PodView

T = TypeVar("T")


class Cache(Protocol):
    """A value derived from the policy set, kept with it (PolicySet.cached)."""

    def __call__(self, key: Hashable, build: Callable[[], T]) -> T: ...


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
        self.backends = Backends(policy.name, spec, self.capacity, catalog)

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
        steered = [r for r in rewrites if r.via.pinnable]
        if self.spec.strategy is Strategy.SINGLE and steered and not gke:
            problems.extend(self.single_strategy_conflicts(pod, tuple(steered)))
        gated = self.gate(pod, rewrites, added, gke)
        problems.extend(Problem(self.policy.name, path, reason) for path, reason in gated.problems)
        if (self.spec.strategy is Strategy.SINGLE or gke) and len({r.profile.name for r in steered}) > 1:
            names = ", ".join(sorted({f"{r.container.name}={r.profile.name}" for r in steered}))
            how = "a GKE node pool" if gke else "single strategy"
            split = f"{how} splits every GPU of a node the same way; containers ask for {names}"
            problems.append(Problem(self.policy.name, "spec", split))
            rewrites = []
        why = ", ".join(m.key for m in gated.pin_models)
        pin_why = f"slices of {why}"
        plan = MigPlan(self.policy, tuple(rewrites), tuple(problems), tuple(warnings), gated.pin, pin_why, gke)
        if gated.keep_off:
            plan = plan.keeping_off(gated.keep_off, f"slices DRA serves only on {why or 'the policy models'}")
        if self.spec.dual_advertised is not DualAdvertised.ALLOW:
            plan = self.off_dual_nodes(pod, plan)
        return plan

    def off_dual_nodes(self, pod: PodView, plan: MigPlan) -> MigPlan:
        """A GPU pod and the nodes whose GPUs both the device plugin and the DRA driver advertise
        (`mig.dualAdvertisedNodes`): nothing, a warning naming them, or the pod kept off them."""
        setting = self.spec.dual_advertised
        if setting is DualAdvertised.ALLOW or not (pod.holds_gpu or pod.claims or pod.extended or plan.rewrites):
            return plan
        nodes = tuple(sorted(self.capacity.dual_advertised()))
        if not nodes:
            return plan
        named = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        if setting is DualAdvertised.WARN:
            said = (
                f"may land on {named}, whose GPUs both the device plugin and the DRA driver advertise: "
                "either may hand out one the other did"
            )
            return plan.avoiding((), (said,))
        return plan.avoiding(nodes, ())

    def gate(self, pod: PodView, rewrites: list[Rewrite], added: tuple[str, ...] = (), gke: bool = False) -> Gated:
        """Every GPU resource the pod names, under this policy's profiles and models, and the pin
        that makes the mixed-strategy slices land (and weigh) where the policy picked. It depends
        on a few names per container only: worked out once per policy set and shape (cached)."""
        served = self.dra_served(pod)
        by_dra = (*served, *(r.profile.resource for r in rewrites if not r.via.pinnable and not r.via.ladder))
        key = (
            "gate",
            self.policy.name,
            tuple((c.init, c.position, tuple(c.gpus.items())) for c in pod.all_containers if c.gpus),
            tuple((r.container.init, r.container.position, r.profile.name, r.models, r.via.pinnable) for r in rewrites),
            pod.annotation("gpu-model"),
            pod.placement,
            added,
            gke,
            served,
            # How DRA holds those names to the policy's models follows the cluster: part of the key.
            tuple(self.backends.hold(n, n.removeprefix(MIG_RESOURCE_PREFIX)) for n in by_dra) if by_dra else (),
        )
        return self.cache(key, lambda: self.gated(pod, rewrites, added, gke, served))

    def dra_served(self, pod: PodView) -> tuple[str, ...]:
        """The MIG names the pod asks for that DRA may serve: never pinned to GFD labels
        (policies.planning.backends), on the first pass or any later one."""
        names = {n for c in pod.all_containers for n in c.gpus if n.startswith(MIG_RESOURCE_PREFIX)}
        return tuple(sorted(n for n in names if not self.backends.by_name(n).pinnable))

    def gated(
        self, pod: PodView, rewrites: list[Rewrite], added: tuple[str, ...], gke: bool, dra_served: tuple[str, ...]
    ) -> Gated:
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
        # A slice DRA may serve lands on nodes without GFD labels: it is charged by the heaviest
        # model it may land on, never pinned to a label, but held to the policy's models by what
        # DRA serves it with, the device plugin's nodes of others kept off (policies.planning.backends).
        devices.extend(Device(r.container, r.profile.name, r.models) for r in rewrites if r.via.pinnable)
        served = frozenset(dra_served)
        by_dra = [d for d in devices if d.container is not None and mixed_resource(d.profile) in served]
        by_dra += [
            Device(r.container, r.profile.name, r.models) for r in rewrites if not r.via.pinnable and not r.via.ladder
        ]
        keep_off: list[str] = []
        for device in by_dra:
            keep_off += self.backends.hold(mixed_resource(device.profile), device.profile)[1]
        devices = [d for d in devices if d.container is None or mixed_resource(d.profile) not in served]
        for profile in added:  # the sidecar's slice: gated as it will be once it is there (a second pass)
            offering = self.catalog.models_with(profile)
            models = tuple(m for m in (picked or self.spec.gpu_models) if m in offering) or (() if picked else offering)
            if models:
                devices.append(Device(None, profile, models))
            else:
                told = ", ".join(m.key for m in picked)
                problems.append(
                    ("metadata.annotations", f"triton sidecar: profile {profile} is not a profile of {told}")
                )
        pinned = pin_for(devices, pod.placement, self.catalog)
        return Gated((*problems, *pinned.problems), pinned.pin, pinned.pin_models, tuple(dict.fromkeys(keep_off)))

    def unheld(self, pod: PodView) -> list[Problem]:
        """Slices the pod names that DRA serves by name on a model the policy leaves out (or may,
        where no device is known): nothing holds it to the policy's models."""
        problems = []
        for container in pod.all_containers:
            for name in container.gpus:
                profile = self.catalog.profile_for_resource(name)
                if profile is None or self.backends.by_name(name).pinnable:
                    continue
                reason, _ = self.backends.hold(name, profile)
                if reason:
                    why = (
                        f"{name}: {reason}, so the pod may get a model the policy does not allow: ask "
                        "nvidia.com/gpu and let the policy choose, or name a claim that selects the model"
                    )
                    problems.append(Problem(self.policy.name, f"{container.path}.resources", why))
        return problems

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
        """The first option with free capacity on one of its models; the best one if none has any;
        a claim instead where the name DRA serves it by could hand it a model the policy leaves
        out (policies.planning.backends). `pinned`: the pod's own cloud label chose the models;
        `gke`: slices are GKE partitions, each one nvidia.com/gpu of a pool split into it."""
        rewrite = self.pick_by_capacity(container, choice, warnings, pinned, gke)
        if rewrite.via.ladder is not None or rewrite.via.pinnable:
            return rewrite
        reason, _ = self.backends.hold(rewrite.profile.resource, rewrite.profile.name)
        if not reason:
            return rewrite
        choice = self.in_cluster(choice) if self.capacity.known else choice
        return self.claimed(
            container, choice, self.backends.claim(choice, f"{rewrite.via.said}, but {reason}: a claim")
        )

    def pick_by_capacity(
        self, container: ContainerView, choice: Choice, warnings: list[str], pinned: bool, gke: bool
    ) -> Rewrite:
        if self.spec.backend is Backend.DRA_CLAIM:
            choice = self.in_cluster(choice) if self.capacity.known else choice
            return self.claimed(container, choice, self.backends.claim(choice, "policy backend draClaim"))
        if not self.capacity.known:
            best = choice.options[0]
            if choice.need is not None and not self.spec.gpu_models and not pinned:
                warnings.append(
                    f"{container.name}: sized against every MIG-capable model (no GPU nodes known and no "
                    f"mig.gpuModels): {best.profile.name} of {best.models[0].key}"
                )
            via = self.backends.by_name(best.profile.resource, self.spec.strategy is Strategy.SINGLE or gke)
            return Rewrite(container, best.profile, best.models, _why(choice, best), via)
        choice = self.in_cluster(choice)
        best = choice.options[0]
        single = self.spec.strategy is Strategy.SINGLE or gke
        for option in choice.options:
            resource = WHOLE_GPU_RESOURCE if single else option.profile.resource
            free = tuple(m for m in option.models if self.capacity.free(m.key, option.profile.name, resource))
            if free:
                via = self.backends.by_name(option.profile.resource, single)
                if option is not best or len(free) < len(option.models):
                    why = f"{_why(choice, option)}; free capacity on {', '.join(m.key for m in free)}"
                    return Rewrite(container, option.profile, free, why, via)
                return Rewrite(container, option.profile, option.models, _why(choice, option), via)
        claim = None if gke else self.backends.claim_instead(choice, best.profile.resource)
        if claim is not None:
            return self.claimed(container, choice, claim)
        warnings.append(f"{container.name}: no free {best.profile.name} slice in the cluster now; the pod will wait")
        via = self.backends.by_name(best.profile.resource, single)
        return Rewrite(container, best.profile, best.models, _why(choice, best), via)

    def claimed(self, container: ContainerView, choice: Choice, via: Via) -> Rewrite:
        """A claim whose ladder is every option of `choice`, best first."""
        models = tuple(dict.fromkeys(m for o in choice.options for m in o.models))
        return Rewrite(container, choice.options[0].profile, models, _why(choice, choice.options[0]), via)

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
