"""The ladders a policy's pods may be given (policies.planning.ladder), worked out ahead so the
replicas can publish their ResourceClaimTemplates before any pod names one: an admission writes
nothing, so a dry run creates nothing, and a pod never waits on a template made for it.

A pod's ladder depends on the policy, the cluster's figures (real memory, the models it has) and
three annotations: `mig-profile`, `gpu-memory` and `gpu-model`. Each is tried the ways that can
give a different ladder: each allowed profile named; a memory need at each profile's real memory
(a need between two figures gives the ladder of the next figure up); each model of the policy, or
none. The same planner makes the pods' ladders, so both agree by construction."""

from __future__ import annotations

from decimal import Decimal

from policies.gpu.capacity import Capacity
from policies.gpu.catalog import Catalog
from policies.gpu.models import mixed_resource
from policies.model.policy import Backend, GPUPolicy
from policies.planning.choices import Choice, sized
from policies.planning.ladder import Ladder
from policies.planning.mig import MigPlanner

ONE = Decimal(1)


def publishes(policy: GPUPolicy, catalog: Catalog, capacity: Capacity) -> bool:
    """Whether pods of `policy` may be given ladder claims in this cluster."""
    return bool(why_published(policy, catalog, capacity))


def why_published(policy: GPUPolicy, catalog: Catalog, capacity: Capacity) -> str:
    """Why pods of `policy` may be given ladder claims ("" where they may not): under `draClaim`
    always; under `auto` where NVIDIA's DRA driver shows slices of a profile the policy allows
    that no class or device plugin serves by name (policies.planning.backends)."""
    spec = policy.mig
    if spec is None or spec.backend in (Backend.DEVICE_PLUGIN, Backend.DRA_EXTENDED_RESOURCE):
        return ""
    if spec.backend is Backend.DRA_CLAIM:
        return "backend draClaim"
    if not capacity.dra_known:
        return ""
    names = sorted({p.name for m in spec.gpu_models or catalog.models for p in m.profiles if spec.allows(p.name)})
    for name in names:
        resource = mixed_resource(name)
        if capacity.dra_offers(name) and not (capacity.dra_serves(resource) or capacity.plugin_serves(resource)):
            return f"backend auto: DRA shows {name} slices and no node serves {resource} by name"
    return ""


def policy_ladders(policy: GPUPolicy, catalog: Catalog, capacity: Capacity) -> dict[str, Ladder]:
    """Every ladder a pod of `policy` may be given, by template name."""
    spec = policy.mig
    if spec is None:
        return {}
    planner = MigPlanner(policy, spec, catalog, capacity=capacity)
    models = spec.gpu_models or catalog.models
    profiles = [(m, p) for m in models for p in m.profiles if p.chosen_unasked and spec.allows(p.name)]
    asks: list[tuple[str | None, str | None]] = [(None, None)]
    asks += [(name, None) for name in dict.fromkeys(p.name for _, p in profiles)]
    asks += [(None, f"{mib}Mi") for mib in sorted({planner.memory_of(m, p)[0] for m, p in profiles})]
    found: dict[str, Ladder] = {}
    for model in (None, *(m.key for m in spec.gpu_models)):
        for explicit, memory in asks:
            outcome = planner.choice.decide(explicit, memory, model, ONE, ONE)
            if not isinstance(outcome, Choice):
                continue
            fitting = sized(outcome, planner.memory_of)
            if not isinstance(fitting, Choice):
                continue
            fitting = planner.in_cluster(fitting) if capacity.known else fitting
            ladder = planner.backends.ladder(fitting)
            found.setdefault(ladder.name(catalog), ladder)
    return found
