"""Writes a MigPlan into the Pod: a ladder claim names its template (policies.planning.ladder);
mixed renames resources (and pins the pod to the models picked for its slices where it could
land elsewhere), single steers to MIG nodes."""

from __future__ import annotations

from policies.gpu.catalog import Catalog
from policies.gpu.cloud import GKE_PARTITION
from policies.gpu.models import PRODUCT_LABEL, WHOLE_GPU_RESOURCE, label_name
from policies.model.policy import Strategy
from policies.planning.ladder import claim_name
from policies.planning.plan import MigPlan, Rewrite, single_strategy_labels
from policies.review.document import Change, Draft, format_count

HOSTNAME_LABEL = "kubernetes.io/hostname"


def apply_plan(doc: Draft, plan: MigPlan, changes: list[Change], catalog: Catalog) -> None:
    if plan.policy is None:
        return
    policy = plan.policy.name
    claimed = [r for r in plan.rewrites if r.via.ladder is not None]
    for rewrite in claimed:
        _claim(doc, rewrite, policy, changes, catalog)
    _apply_by_name(doc, plan.without(claimed) if claimed else plan, policy, changes)
    if plan.avoid_nodes:  # GPUs both the device plugin and the DRA driver advertise (mig.dualAdvertisedNodes)
        why = "nodes whose GPUs both the device plugin and the DRA driver advertise"
        steer(doc, plan.avoid_nodes, why, policy, changes, HOSTNAME_LABEL, "NotIn")


def _apply_by_name(doc: Draft, plan: MigPlan, policy: str, changes: list[Change]) -> None:
    """Slices asked for by resource name: renamed (mixed, and DRA extended resources) or steered (single)."""
    if plan.gke and plan.rewrites:  # GKE's partitions: nvidia.com/gpu stays, the pool is chosen by its label
        profile = label_name(plan.rewrites[0].profile.name)
        steer(doc, (profile,), plan.rewrites[0].why, policy, changes, GKE_PARTITION)
    elif plan.strategy is Strategy.MIXED:
        for rewrite in plan.rewrites:
            _rename(doc, rewrite, policy, changes)
        if plan.pin:  # the slices land, and weigh, where the policy picked (policies.planning.gate)
            steer(doc, plan.pin, plan.pin_why, policy, changes)
        if plan.keep_off:  # slices DRA serves by name: the device plugin's nodes of other models kept off
            steer(doc, plan.keep_off, plan.keep_off_why, policy, changes, operator="NotIn")
    elif plan.rewrites:
        _steer(doc, plan, changes)


def _claim(doc: Draft, rewrite: Rewrite, policy: str, changes: list[Change], catalog: Catalog) -> None:
    """The container's whole GPU becomes a claim from the ladder's ResourceClaimTemplate, which the
    replicas publish ahead (webhook/cluster/ladders.py): the pod names it, the container uses it."""
    ladder = rewrite.via.ladder
    assert ladder is not None
    container = rewrite.container
    spec = doc.spec()
    claims = doc.child(spec, "resourceClaims", list)
    taken = frozenset(str(c.get("name")) for c in claims if isinstance(c, dict))
    name = claim_name(container.name, taken)
    template = ladder.name(catalog)
    doc.append(claims, {"name": name, "resourceClaimTemplateName": template})
    resources = doc.child(doc.container(container.init, container.position), "resources")
    for section in ("limits", "requests"):
        values = resources.get(section)
        if isinstance(values, dict) and WHOLE_GPU_RESOURCE in values:
            doc.remove(doc.child(resources, section), WHOLE_GPU_RESOURCE)
    doc.append(doc.child(resources, "claims", list), {"name": name})
    why = f"{rewrite.why}; {rewrite.via.said}"
    said = f"nvidia.com/gpu -> claim {name} from ResourceClaimTemplate {template}: {ladder.said()} ({why})"
    changes.append(Change(f"{container.path}.resources", said, policy))


def _rename(doc: Draft, rewrite: Rewrite, policy: str, changes: list[Change]) -> None:
    container = rewrite.container
    resources = doc.child(doc.container(container.init, container.position), "resources")
    count = format_count(container.amount(WHOLE_GPU_RESOURCE))
    for section in ("limits", "requests"):
        values = doc.child(resources, section)
        doc.remove(values, WHOLE_GPU_RESOURCE)
        doc.set(values, rewrite.profile.resource, count)
    why = f"{rewrite.why}; {rewrite.via.said}" if rewrite.via.said else rewrite.why
    changes.append(
        Change(f"{container.path}.resources", f"nvidia.com/gpu -> {rewrite.profile.resource} ({why})", policy)
    )


def _steer(doc: Draft, plan: MigPlan, changes: list[Change]) -> None:
    assert plan.policy is not None
    steer(doc, single_strategy_labels(plan.rewrites), plan.rewrites[0].why, plan.policy.name, changes)


def steer(
    doc: Draft,
    labels: tuple[str, ...],
    why: str,
    policy: str,
    changes: list[Change],
    key: str = PRODUCT_LABEL,
    operator: str = "In",
) -> None:
    """Pin the pod to nodes whose label `key` (nvidia.com/gpu.product) is one of `labels` (or, with
    `NotIn`, to nodes whose label is none of them: nodes without it included)."""
    spec = doc.spec()
    if key in (spec.get("nodeSelector") or {}):
        return  # already pinned: to these nodes, or MigPlanner reported the conflict
    if len(labels) == 1 and operator == "In":
        doc.set(doc.child(spec, "nodeSelector"), key, labels[0])
        changes.append(Change(f"spec.nodeSelector.{key}", f"{labels[0]} ({why})", policy))
        return
    requirement = {"key": key, "operator": operator, "values": list(labels)}
    what = f"{key} {'in' if operator == 'In' else 'not in'} {', '.join(labels)} ({why})"
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
