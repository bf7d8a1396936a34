"""Writes a MigPlan into the Pod: mixed renames resources (and pins the pod to the models picked
for its slices where it could land elsewhere), single steers to MIG nodes."""

from __future__ import annotations

from policies.gpu.cloud import GKE_PARTITION
from policies.gpu.models import PRODUCT_LABEL, WHOLE_GPU_RESOURCE, label_name
from policies.model.policy import Strategy
from policies.planning.mig import MigPlan, Rewrite, single_strategy_labels
from policies.review.document import Change, Draft, format_count


def apply_plan(doc: Draft, plan: MigPlan, changes: list[Change]) -> None:
    if plan.policy is None:
        return
    if plan.gke and plan.rewrites:  # GKE's partitions: nvidia.com/gpu stays, the pool is chosen by its label
        profile = label_name(plan.rewrites[0].profile.name)
        steer(doc, (profile,), plan.rewrites[0].why, plan.policy.name, changes, GKE_PARTITION)
    elif plan.strategy is Strategy.MIXED:
        for rewrite in plan.rewrites:
            _rename(doc, rewrite, plan.policy.name, changes)
        if plan.pin:  # the slices land, and weigh, where the policy picked (policies.planning.gate)
            steer(doc, plan.pin, plan.pin_why, plan.policy.name, changes)
    elif plan.rewrites:
        _steer(doc, plan, changes)


def _rename(doc: Draft, rewrite: Rewrite, policy: str, changes: list[Change]) -> None:
    container = rewrite.container
    resources = doc.child(doc.container(container.init, container.position), "resources")
    count = format_count(container.amount(WHOLE_GPU_RESOURCE))
    for section in ("limits", "requests"):
        values = doc.child(resources, section)
        doc.remove(values, WHOLE_GPU_RESOURCE)
        doc.set(values, rewrite.profile.resource, count)
    changes.append(
        Change(f"{container.path}.resources", f"nvidia.com/gpu -> {rewrite.profile.resource} ({rewrite.why})", policy)
    )


def _steer(doc: Draft, plan: MigPlan, changes: list[Change]) -> None:
    assert plan.policy is not None
    steer(doc, single_strategy_labels(plan.rewrites), plan.rewrites[0].why, plan.policy.name, changes)


def steer(
    doc: Draft, labels: tuple[str, ...], why: str, policy: str, changes: list[Change], key: str = PRODUCT_LABEL
) -> None:
    """Pin the pod to nodes whose label `key` (nvidia.com/gpu.product) is one of `labels`."""
    spec = doc.spec()
    if key in (spec.get("nodeSelector") or {}):
        return  # already pinned: to these nodes, or MigPlanner reported the conflict
    if len(labels) == 1:
        doc.set(doc.child(spec, "nodeSelector"), key, labels[0])
        changes.append(Change(f"spec.nodeSelector.{key}", f"{labels[0]} ({why})", policy))
        return
    requirement = {"key": key, "operator": "In", "values": list(labels)}
    what = f"{key} in {', '.join(labels)} ({why})"
    if not spec.get("affinity"):  # the usual case: one operation carries the whole affinity
        terms_only = {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}
        doc.set(spec, "affinity", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms_only}})
        changes.append(Change("spec.affinity.nodeAffinity", what, policy))
        return
    node_affinity = doc.child(doc.child(spec, "affinity"), "nodeAffinity")
    node_selector = doc.child(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution")
    terms = doc.child(node_selector, "nodeSelectorTerms", list)
    if not terms:
        doc.append(terms, {})
    added = False
    for i in range(len(terms)):
        expressions = doc.child(doc.item(terms, i), "matchExpressions", list)
        if requirement not in expressions:
            doc.append(expressions, requirement)
            added = True
    if added:
        changes.append(Change("spec.affinity.nodeAffinity", what, policy))
