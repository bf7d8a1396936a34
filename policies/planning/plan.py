"""The MIG plan of a pod, as planned (policies.planning.mig) and then written (policies.mutate) or
judged: each whole-GPU container's slice and how it reaches it, the requests the policy cannot
serve, warnings, and the node pin."""

from __future__ import annotations

from dataclasses import dataclass

from policies.gpu.models import GpuModel, Profile
from policies.model.policy import GPUPolicy, Strategy
from policies.planning.backends import PLUGIN, Via
from policies.review.containers import ContainerView

# Rewrite and MigPlan are made per container and per review: plain classes, never changed once
# made (the value-class rule, docs/architecture.md).


class Rewrite:
    __slots__ = ("container", "profile", "models", "why", "via")

    def __init__(
        self, container: ContainerView, profile: Profile, models: tuple[GpuModel, ...], why: str, via: Via = PLUGIN
    ) -> None:
        self.container = container
        self.profile = profile  # the slice, or a ladder's first rung (policies.planning.backends)
        self.models = models
        self.why = why
        self.via = via

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
    __slots__ = (
        "policy",
        "rewrites",
        "problems",
        "warnings",
        "pin",
        "pin_why",
        "gke",
        "keep_off",
        "keep_off_why",
        "avoid_nodes",
    )

    def __init__(
        self,
        policy: GPUPolicy | None,
        rewrites: tuple[Rewrite, ...] = (),
        problems: tuple[Problem, ...] = (),
        warnings: tuple[str, ...] = (),
        pin: tuple[str, ...] = (),  # mixed strategy: product labels the pod must land on (policies.planning.gate)
        pin_why: str = "",
        gke: bool = False,  # pinned to a GKE accelerator: slices are GKE's partitions (policies.gpu.cloud)
        keep_off: tuple[str, ...] = (),  # product labels it must not land on: slices DRA serves by name
        keep_off_why: str = "",
        avoid_nodes: tuple[str, ...] = (),  # nodes it must not land on: GPUs advertised twice
    ) -> None:
        self.policy = policy
        self.rewrites = rewrites
        self.problems = problems
        self.warnings = warnings
        self.pin = pin
        self.pin_why = pin_why
        self.gke = gke
        self.keep_off = keep_off
        self.keep_off_why = keep_off_why
        self.avoid_nodes = avoid_nodes

    def without(self, rewrites: list[Rewrite]) -> MigPlan:
        """The plan with `rewrites` (written already) left out."""
        kept = tuple(r for r in self.rewrites if all(r is not w for w in rewrites))
        return MigPlan(
            self.policy,
            kept,
            self.problems,
            self.warnings,
            self.pin,
            self.pin_why,
            self.gke,
            self.keep_off,
            self.keep_off_why,
        )

    def keeping_off(self, labels: tuple[str, ...], why: str) -> MigPlan:
        """The plan, the pod kept off nodes of these product labels (none: itself)."""
        if not labels:
            return self
        return MigPlan(
            self.policy, self.rewrites, self.problems, self.warnings, self.pin, self.pin_why, self.gke, labels, why
        )

    def avoiding(self, nodes: tuple[str, ...], warnings: tuple[str, ...]) -> MigPlan:
        """The plan, the pod kept off `nodes`, with `warnings` beside its own."""
        return MigPlan(
            self.policy,
            self.rewrites,
            self.problems,
            (*self.warnings, *warnings),
            self.pin,
            self.pin_why,
            self.gke,
            self.keep_off,
            self.keep_off_why,
            nodes,
        )

    @property
    def models(self) -> tuple[GpuModel, ...]:
        """The deciding policy's GPU models."""
        return self.policy.mig.gpu_models if self.policy and self.policy.mig else ()

    @property
    def strategy(self) -> Strategy:
        return self.policy.mig.strategy if self.policy and self.policy.mig else Strategy.MIXED


def single_strategy_labels(rewrites: tuple[Rewrite, ...]) -> tuple[str, ...]:
    """nvidia.com/gpu.product values of the nodes that can serve these rewrites under single strategy."""
    labels: dict[str, None] = {}
    for rewrite in rewrites:
        for model in rewrite.models:
            labels.update(dict.fromkeys(model.single_strategy_labels(rewrite.profile, legacy=True)))
    return tuple(labels)
