"""Which policies apply to a pod under review, and how: the one set-up every admission question
(mutate, validate, an ephemeral container) starts from, and the MIG plan the deciding policy
makes for the pod (with the slice of the Triton sidecar it will get, planned in the same pass)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from policies.gpu.capacity import Capacity
from policies.model.cel import CelInput
from policies.model.policy import GPUPolicy
from policies.model.policyset import PolicySet
from policies.planning.mig import MigPlanner
from policies.planning.plan import MigPlan, Problem
from policies.planning.sidecar import sidecar_slice
from policies.review.cluster import ClusterState
from policies.review.document import JSON
from policies.review.pod import PodView, parse_pod
from policies.review.request import RequestInfo


class Applicable(NamedTuple):
    view: PodView
    namespace: str  # the API server's word, not the object's
    request: RequestInfo  # in that namespace
    namespace_labels: Mapping[str, str] | None
    data: CelInput  # what CEL sees: built only if an expression is evaluated
    policies: tuple[GPUPolicy, ...]  # in precedence order
    errors: tuple[tuple[GPUPolicy, str], ...]  # conditions that failed to evaluate, and why


def skipped(view: PodView, request: RequestInfo) -> bool:
    """Out of scope: no way to a GPU and no Triton asked for, or a kubelet's mirror pod (the
    annotation alone is anyone's to write: only a node's own request is skipped)."""
    return not view.in_scope or (view.mirror and request.from_node)


def applicable(raw: JSON, policy_set: PolicySet, request: RequestInfo, cluster: ClusterState) -> Applicable | None:
    """The pod read once, and the policies that match it; None when it is out of scope.
    InputError if the pod is malformed."""
    view = parse_pod(raw)
    if skipped(view, request):
        return None
    namespace = request.namespace or view.namespace
    request = request.in_namespace(namespace)
    namespace_labels = cluster.namespace_labels(namespace)
    data = request.cel_input(raw, namespace_labels)
    match = policy_set.matching(namespace, view.labels, data, namespace_labels, obj=raw)
    return Applicable(view, namespace, request, namespace_labels, data, match.policies, match.errors)


def plan_mig(
    view: PodView,
    matched: tuple[GPUPolicy, ...],
    policy_set: PolicySet,
    capacity: Capacity | None = None,
) -> MigPlan:
    """What the first matching policy with a `mig` section makes of the pod's GPU requests."""
    owner = next((p for p in matched if p.mig is not None), None)
    if owner is None or owner.mig is None:
        return MigPlan(None)
    planner = MigPlanner(owner, owner.mig, policy_set.catalog, policy_set.cached, capacity)
    sidecar = sidecar_slice(view, matched)  # lands with the pod: pinned with its slices in one pass
    return planner.plan(view, (sidecar,) if sidecar else ())


def unheld_slices(
    view: PodView, matched: tuple[GPUPolicy, ...], policy_set: PolicySet, capacity: Capacity
) -> list[Problem]:
    """Slices the pod names that DRA serves on a model its deciding policy leaves out."""
    owner = next((p for p in matched if p.mig is not None), None)
    if owner is None or owner.mig is None or not owner.mig.gpu_models or not capacity.dra_known:
        return []
    return MigPlanner(owner, owner.mig, policy_set.catalog, policy_set.cached, capacity).unheld(view)
