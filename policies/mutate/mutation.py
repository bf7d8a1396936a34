"""The mutating side: what the webhook does to a GPU pod, and why.

Returns the mutated object with its RFC 6902 patch, the changes with their policies, warnings,
and the problems the validating side will deny on.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson

from policies.model.policy import Strategy
from policies.model.policyset import PolicySet
from policies.mutate.rewrite import apply_plan
from policies.mutate.runtime import apply_runtime, merge
from policies.mutate.triton import inject_triton
from policies.planning.applicable import applicable, plan_mig
from policies.planning.plan import MigPlan, Problem
from policies.review.cluster import NO_CLUSTER, ClusterState
from policies.review.document import JSON, Change, Draft, change_texts
from policies.review.pod import ANNOTATION_PREFIX
from policies.review.request import RequestInfo

MUTATED_ANNOTATION = ANNOTATION_PREFIX + "mutated"


# Made once a review and taken apart by its callers: a NamedTuple (the value-class rule,
# docs/architecture.md).
class MutationResult(NamedTuple):
    object: JSON
    patch: tuple[JSON, ...] = ()  # RFC 6902 operations from the pod as sent to object, as written
    changes: tuple[Change, ...] = ()
    warnings: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    policies: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def mutate_pod(
    raw: JSON,
    policy_set: PolicySet,
    request: RequestInfo | None = None,
    cluster: ClusterState = NO_CLUSTER,
) -> MutationResult:
    """InputError if the Pod is malformed; otherwise what the mutating webhook would do."""
    applies = applicable(raw, policy_set, request or RequestInfo(), cluster)
    if applies is None:
        return MutationResult(raw)
    view, namespace, matched = applies.view, applies.namespace, applies.policies
    warnings = [f"policy {p.name} skipped: {why}" for p, why in applies.errors]
    plan = plan_mig(view, matched, policy_set, cluster.capacity)
    doc = Draft(raw)
    changes: list[Change] = []
    problems = list(plan.problems)
    apply_plan(doc, plan, changes, policy_set.catalog)
    merged = policy_set.memo("runtime", matched, merge)
    inject_triton(doc, view, matched, plan, merged, changes, problems, warnings, policy_set.catalog)
    if merged is not None:
        gpu_containers = [c for c in view.all_containers if c.holds_gpu]
        apply_runtime(doc, view, merged, gpu_containers, changes, warnings)
    if changes:
        _record(doc, changes)
    warnings.extend(plan.warnings)
    warnings.extend(_sidestepped_quotas(plan, cluster.gpu_quotas(namespace)))
    warnings.extend(f"will be denied: {p}" for p in problems)
    return MutationResult(
        object=doc.root if changes else raw,
        patch=tuple(doc.operations) if changes else (),
        changes=tuple(changes),
        warnings=tuple(warnings),
        problems=tuple(problems),
        policies=tuple(p.name for p in matched),
    )


def _sidestepped_quotas(plan: MigPlan, quotas: tuple[str, ...]) -> list[str]:
    """Native ResourceQuota runs after mutation: slices are no longer charged to nvidia.com/gpu."""
    if not quotas or not plan.rewrites or plan.strategy is not Strategy.MIXED:
        return []
    resources = ", ".join(sorted({r.profile.resource for r in plan.rewrites}))
    return [f"ResourceQuota {', '.join(quotas)} counts requests.nvidia.com/gpu, not this pod's {resources}"]


def _record(doc: Draft, changes: list[Change]) -> None:
    """Keep what was changed in the pod itself, merged with any earlier pass's record."""
    annotations = doc.child(doc.child(doc.root, "metadata"), "annotations")
    recorded = dict.fromkeys(_earlier_record(annotations.get(MUTATED_ANNOTATION)))
    recorded.update(dict.fromkeys(change_texts(changes)))
    doc.set(annotations, MUTATED_ANNOTATION, orjson.dumps(list(recorded)).decode())


def _earlier_record(text: object) -> list[str]:
    if not isinstance(text, str):
        return []
    try:
        earlier = orjson.loads(text)
    except orjson.JSONDecodeError:
        return []
    return [e for e in earlier if isinstance(e, str)] if isinstance(earlier, list) else []
