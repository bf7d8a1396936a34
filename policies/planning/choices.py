"""What a policy allows a whole-GPU container, from a few annotation texts alone: the profile
options in order of preference, a refusal with its reason, or whole GPUs kept.

Order of choice: `mig-profile.<container>`, `mig-profile`, the smallest profile whose memory
covers `gpu-memory`, the policy's `defaultProfile`. A `gpu-memory` need keeps here every profile
whose *named* memory covers it (real memory is never more); which of them really hold it is
settled per request against the real figures (`sized`): GFD's node labels where the cluster is
known, NVIDIA's observed sizes otherwise. Models come from `gpu-model` or the policy's
`gpuModels` (in order of preference), else every model the catalog knows (least of a GPU first).
One MIG device per container: N > 1 whole GPUs are never turned into N slices. It depends only
on the policy and those texts, so the planner keeps each answer for the policy set's life
(policies.planning.mig).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal

from policies.gpu.catalog import Catalog, CatalogError
from policies.gpu.models import GpuModel, Profile
from policies.model.policy import MigSpec, MultiGpu
from policies.quantity import parse_quantity

GIB = Decimal(2**30)
MIB = Decimal(2**20)
MemoryOf = Callable[[GpuModel, Profile], tuple[int, str]]  # real MiB, and where the figure comes from


@dataclass(frozen=True, slots=True)
class Option:
    """One profile a container may get, and the models (in preference order) that offer it."""

    profile: Profile
    models: tuple[GpuModel, ...]
    sized: str = ""  # how its memory was judged to cover the need


@dataclass(frozen=True, slots=True)
class Choice:
    """The options a policy allows a container, best first, and why it gets a slice at all."""

    options: tuple[Option, ...]
    why: str
    need: Decimal | None = None  # bytes of GPU memory asked for (gpu-memory)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request the policy cannot serve: denied by the validating side with this reason."""

    reason: str


@dataclass(frozen=True, slots=True)
class KeepWhole:
    """N > 1 whole GPUs under `multiGpu: keep`: left as they are, with a warning."""

    reason: str


Outcome = Choice | Refusal | KeepWhole | None


class ProfileChoice:
    def __init__(self, spec: MigSpec, catalog: Catalog) -> None:
        self.spec = spec
        self.catalog = catalog

    def decide(
        self,
        explicit: str | None,
        memory_text: str | None,
        model_key: str | None,
        requests: Decimal | None,
        limits: Decimal | None,
        pinned: tuple[GpuModel, ...] = (),
    ) -> Outcome:
        """`pinned`: the models a cloud label pins the pod to (policies.gpu.cloud), if any."""
        if requests is not None and limits is not None and requests != limits:
            return Refusal(f"nvidia.com/gpu requests ({requests}) must equal limits ({limits})")
        count = limits if limits is not None else requests
        assert count is not None
        if count != count.to_integral_value() or count < 1:
            return Refusal(f"nvidia.com/gpu must be a whole number of 1 or more, not {count}")
        models = self.candidate_models(model_key)
        if isinstance(models, Refusal):
            return models
        if pinned:
            models = self.within_pin(models, pinned)
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

    def within_pin(self, models: tuple[GpuModel, ...], pinned: tuple[GpuModel, ...]) -> tuple[GpuModel, ...] | Refusal:
        """The candidate models the pod's own pin reaches (all it pins, where the policy names none)."""
        kept = tuple(m for m in models if m in pinned) if models else pinned
        if not kept:
            where = ", ".join(m.key for m in pinned)
            allowed = ", ".join(m.key for m in models)
            return Refusal(f"the pod is pinned to {where} nodes, which this policy's models ({allowed}) do not include")
        return kept

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
        if text.strip().replace(".", "", 1).isdigit():
            # A quantity without a unit is bytes: "15" would quietly get the smallest slice.
            return Refusal(f"gpu-memory {text!r} has no unit, which is {text.strip()} bytes: write {text.strip()}Gi?")
        try:
            need = parse_quantity(text)
        except (ValueError, TypeError, ArithmeticError):
            return Refusal(f"gpu-memory {text!r} is not a Kubernetes quantity (e.g. 15Gi)")
        # No gpuModels: every catalog model is sized; which of them the cluster has is settled
        # per request against its nodes (MigPlanner.pick), as free capacity is.
        models = models or self.catalog.models
        fitting = [
            sorted(
                (p for p in m.profiles if p.chosen_unasked and self.spec.allows(p.name) and p.memory_gb * GIB >= need),
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
        found = [Option(p, tuple(ms)) for p, ms in options.values()]
        if not self.spec.gpu_models:
            # No preference of the policy's: the least of a GPU that holds the need comes first.
            found.sort(key=lambda o: (min(m.weight(o.profile) for m in o.models), o.profile.memory_gb))
        return Choice(tuple(found), f"gpu-memory {text}", need)


def sized(choice: Choice, memory_of: MemoryOf) -> Choice | Refusal:
    """The options whose real memory covers the need, on the models where it does; each says the
    figure it was judged by. A choice without a memory need is returned as it is."""
    need = choice.need
    if need is None:
        return choice
    kept: list[Option] = []
    short: list[tuple[Profile, int, GpuModel, str]] = []  # said only if nothing fits
    for option in choice.options:
        fits: list[GpuModel] = []
        figure = ""
        for model in option.models:
            mib, source = memory_of(model, option.profile)
            if mib * MIB >= need:
                fits.append(model)
                figure = figure or _figure(option.profile, mib, model, source)
            else:
                short.append((option.profile, mib, model, source))
        if fits:
            kept.append(replace(option, models=tuple(fits), sized=figure))
    if not kept:
        said = "; ".join(_figure(*found) for found in short[:4])
        return Refusal(f"no allowed MIG profile has {_gib(need)} of real memory: {said}")
    return replace(choice, options=tuple(kept))


def _figure(profile: Profile, mib: int, model: GpuModel, source: str) -> str:
    return f"{profile.name} has {mib} MiB on {model.key} ({source})"


def _gib(memory: Decimal) -> str:
    return f"{(memory / GIB).normalize():f}Gi"
