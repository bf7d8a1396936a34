"""The validating side: rules, quotas and unservable GPU requests, judged on the mutated pod."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from policies.errors import InputError
from policies.judge.budgets import NO_READS, BudgetKey, BudgetReads, Counted, PodBudgets
from policies.judge.claim_checks import pod_claim_checks
from policies.judge.claim_usage import ClaimsCharge, SharedClaims, claim_verdicts, claims_charge, with_claims
from policies.judge.quota import UsageSource, scope_of
from policies.judge.rules import check_rules
from policies.judge.security import check_security
from policies.judge.usage import EMPTY, Usage, pod_usage
from policies.judge.verdict import Verdict
from policies.model.policy import Action, GPUPolicy, Quota
from policies.model.policyset import PolicySet
from policies.planning.applicable import applicable, plan_mig, unheld_slices
from policies.planning.sidecar import triton_problem
from policies.review.cluster import NO_CLUSTER, ClusterState
from policies.review.document import JSON
from policies.review.pod import FRACTION_ANNOTATION, SHARED_MEMORY_ANNOTATION, parse_pod
from policies.review.request import Operation, RequestInfo

_AUDIT_KEY = re.compile(r"[^a-z0-9.-]+")


def audit_key(name: str, digest: bool = False) -> str:
    """An audit annotation key: lower-case letters, digits, '-' and '.', at most 63 characters,
    alphanumeric at both ends; with `digest`, ending in 8 hex digits of the whole name."""
    key = _AUDIT_KEY.sub("-", name.lower())
    if digest:
        tail = hashlib.sha256(name.encode()).hexdigest()[:8]
        return f"{key[:54].strip('-.')}-{tail}".lstrip("-.")
    return key[:63].strip("-.") or "audit"


# Made once a review and taken apart by its callers: a NamedTuple (the value-class rule,
# docs/architecture.md).
class Decision(NamedTuple):
    allowed: bool
    verdicts: tuple[Verdict, ...] = ()
    usage: Usage = EMPTY
    policies: tuple[str, ...] = ()
    charges: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()  # what is worth knowing but judges nothing (who makes a workload's pods)
    shared: SharedClaims = ()  # the ResourceClaims the pod names, in `usage` (a budget charges each once)
    # A pod's budgets not judged yet (policies.judge.budgets): `settle` judges them on a
    # UsageSource's counts.
    budgets: PodBudgets | None = None

    def settle(self, source: UsageSource) -> Decision:
        """The decision with its budgets judged on what `source` counts now; itself when it has
        none left to judge. Cheap (no CEL, no pod read again): the webhook runs it under its
        counters' lock, as one step with the reservation, and again on each strict retry."""
        budgets = self.budgets
        if budgets is None:
            return self
        found = budgets.verdicts(source)
        allowed = self.allowed and not any(v.action is Action.DENY for v in found)
        verdicts = (*self.verdicts, *found) if found else self.verdicts
        return Decision(allowed, verdicts, self.usage, self.policies, self.charges, self.notes, self.shared)

    def settle_on(self, ledger: Counted, reads: BudgetReads, beyond: Mapping[BudgetKey, Sequence[Usage]]) -> Decision:
        """`settle` on a snapshot of the budgets it reads (`reads`, its `budget_reads`, read once
        by the caller): what `ledger` holds in each, plus what `beyond` adds
        (policies.judge.ledger.Ledger.counts). The webhook's counters call it under their lock,
        the snapshot and the verdict in one step."""
        return self if self.budgets is None else self.settle(ledger.counts(reads, beyond))

    @property
    def budget_reads(self) -> BudgetReads:
        """What `settle` reads: the budgets left to judge (none: it reads nothing)."""
        return NO_READS if self.budgets is None else self.budgets.reads

    @property
    def own_usage(self) -> Usage:
        """`usage` but the named claims (a ledger charges those once per budget, apart)."""
        own = self.usage
        for _, usage in self.shared:
            own = own - usage
        return own

    @property
    def denials(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.action is Action.DENY)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(str(v) for v in self.verdicts if v.action is Action.WARN)

    @property
    def audit_annotations(self) -> dict[str, str]:
        """Keys the API server keeps: it writes `<webhook name>/<key>` and drops the annotation
        unless that is a qualified name (the key at most 63 characters, alphanumeric at both
        ends), so the key is cut first and its ends trimmed after. Each (policy, rule) has a key
        of its own: where two would meet, the later one ends in a digest of its full name."""
        annotations: dict[str, str] = {}
        owners: dict[str, str] = {}
        for v in self.verdicts:
            if v.action is not Action.AUDIT:
                continue
            full = f"{v.policy}.{v.rule}"
            key = audit_key(full)
            if owners.get(key, full) != full:
                key = audit_key(full, digest=True)
            owners[key] = full
            annotations[key] = f"{annotations[key]}; {v.message}" if key in annotations else v.message
        return annotations

    @property
    def message(self) -> str:
        return "; ".join(str(v) for v in self.denials)

    @property
    def answer(self) -> Answer:
        """What a review's response says of this decision, read in one step."""
        return Answer(self.allowed, self.warnings, self.message, self.audit_annotations)


class Answer(NamedTuple):
    """A decision as a review's response carries it."""

    allowed: bool
    warnings: tuple[str, ...]
    message: str
    audit_annotations: dict[str, str]


def subject_of(raw: JSON, namespace: str) -> str:
    """How verdicts name the object: `Kind namespace/name` (read after the object was checked)."""
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    name = metadata.get("name") or metadata.get("generateName") or "(unnamed)"
    kind = raw.get("kind") if isinstance(raw.get("kind"), str) else "Pod"
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _out_of_force(policy_set: PolicySet, namespace: str) -> list[Verdict]:
    """A policy that never loaded fails closed for every pod it could hold, rather than lapse."""
    if not policy_set.lapsed:
        return []
    return [
        Verdict(
            lapsed.policy,
            "policy.outOfForce",
            "metadata",
            f"policy {lapsed.policy} is out of force: {lapsed.file} has never loaded ({lapsed.why[:160]}); "
            "GPU pods it could hold are denied until it loads",
            Action.DENY,
        )
        for lapsed in policy_set.lapsed_in(namespace)
    ]


def validate_pod(
    raw: JSON,
    policy_set: PolicySet,
    usage_source: UsageSource,
    request: RequestInfo | None = None,
    subject: str = "",
    cluster: ClusterState = NO_CLUSTER,
) -> Decision:
    """InputError if the Pod is malformed; otherwise the verdicts of every matching policy, its
    budgets judged on `usage_source`."""
    return judge_pod(raw, policy_set, request, subject, cluster).settle(usage_source)


def judge_pod(
    raw: JSON,
    policy_set: PolicySet,
    request: RequestInfo | None = None,
    subject: str = "",
    cluster: ClusterState = NO_CLUSTER,
) -> Decision:
    """InputError if the Pod is malformed; otherwise the verdicts of every matching policy but
    its budgets, left to `Decision.settle` (they read what other pods hold)."""
    applies = applicable(raw, policy_set, request or RequestInfo(), cluster)
    kept = _share_kept(raw, request or RequestInfo(), policy_set, cluster)
    if applies is None:
        if kept is None:
            return Decision(True)
        return Decision(False, (kept.about(subject or subject_of(raw, request.namespace if request else "")),))
    view, namespace, request, matched = applies.view, applies.namespace, applies.request, applies.policies
    subject = subject or subject_of(raw, namespace)
    verdicts = [] if kept is None else [kept]
    verdicts += [
        Verdict(
            p.name,
            "match.condition",
            "spec.match.condition",
            f"{why}, denied to be safe (policy {p.name})",
            Action.DENY,
        )
        for p, why in applies.errors
    ]
    verdicts.extend(_out_of_force(policy_set, namespace))
    plan = plan_mig(view, matched, policy_set)
    problems = plan.problems
    if cluster.capacity.dra_known:  # slices DRA serves on a model the policy leaves out
        problems = (*problems, *unheld_slices(view, matched, policy_set, cluster.capacity))
    verdicts.extend(Verdict(p.policy, "mig", p.path, f"{p.message} (policy {p.policy})", Action.DENY) for p in problems)
    sidecar = triton_problem(view, matched)
    if sidecar is not None:
        message = f"{sidecar.message} (policy {sidecar.policy})"
        verdicts.append(Verdict(sidecar.policy, "triton", sidecar.path, message, Action.DENY))
    verdicts.extend(check_security(view, matched))
    claims = claims_charge(view, namespace, cluster, policy_set.catalog)
    verdicts.extend(claim_verdicts(claims, matched, cluster))
    if claims.demands:
        verdicts.extend(pod_claim_checks(claims, matched, cluster.device_classes, cluster.devices, policy_set.catalog))
    base = pod_usage(view, policy_set.catalog)
    usage = with_claims(base, claims)
    added = _added_by_update(usage, claims, request, policy_set)
    joined = _joined_by_update(matched, request, policy_set, cluster)
    charges: list[tuple[str, str]] = []
    quotas: list[tuple[GPUPolicy, Quota, str]] = []
    for policy in matched:
        verdicts.extend(check_rules(policy, applies.data))
        quota = policy.quota
        new_here = request.operation is Operation.CREATE or policy.name in joined
        if quota is None or usage.empty or (not new_here and added is None):
            continue
        scope = scope_of(quota, namespace)
        quotas.append((policy, quota, scope))
        charges.append((policy.name, scope))  # an UPDATE's growth is held too, until the watch shows it
    budgets = PodBudgets(tuple(quotas), namespace, usage, base, claims, added, subject, joined) if quotas else None
    verdicts = [v.about(subject) for v in verdicts]
    allowed = not any(v.action is Action.DENY for v in verdicts)
    matched_names = tuple(p.name for p in matched)
    return Decision(allowed, tuple(verdicts), usage, matched_names, tuple(charges), (), claims.shared, budgets)


def _added_by_update(usage: Usage, claims: ClaimsCharge, request: RequestInfo, policy_set: PolicySet) -> Usage | None:
    """What an UPDATE adds to a pod's charge: a gated pod may still narrow its node constraints
    (onto split nodes, where a whole GPU becomes a slice of a budget it did not touch) or change
    its containers. None for a CREATE, or where the update adds nothing, or without an old
    version to compare with (the API server sends its stored object: no requester writes it)."""
    if request.operation is not Operation.UPDATE or not isinstance(request.old_object, dict):
        return None
    try:
        # A pod's resourceClaims cannot change: the old pod held the same claims.
        before = with_claims(pod_usage(parse_pod(request.old_object), policy_set.catalog), claims)
    except InputError:
        return None
    grown = usage.more_than(before)
    return None if grown.is_zero else grown


def _share_kept(raw: JSON, request: RequestInfo, policy_set: PolicySet, cluster: ClusterState) -> Verdict | None:
    """A bound pod keeps the GPU share KAI's or Run:ai's scheduler gave it by annotation (the
    device is its until it ends), so an UPDATE may not lower or remove the annotations: every
    budget would count the pod as holding less while it keeps what it holds. Refused in the name
    of the first quota policy that charged the old pod (any policy where none has a quota)."""
    old = request.old_object
    if request.operation is not Operation.UPDATE or not isinstance(old, dict):
        return None
    spec = old.get("spec")
    if not isinstance(spec, dict) or not spec.get("nodeName"):
        return None  # not bound: nothing handed out yet, its share is its writer's to change
    try:
        before = applicable(old, policy_set, request, cluster)
    except InputError:
        return None
    if before is None or not before.view.gpu_share or not before.policies:
        return None
    try:
        now = parse_pod(raw).gpu_share
    except InputError:
        return None  # the pod as updated is refused as unreadable anyway
    if now >= before.view.gpu_share:
        return None
    owner = next((p for p in before.policies if p.quota is not None), before.policies[0])
    annotations = before.view.annotations
    name = FRACTION_ANNOTATION if FRACTION_ANNOTATION in annotations else SHARED_MEMORY_ANNOTATION
    message = (
        f"a bound pod keeps the GPU share it was given ({float(before.view.gpu_share):g} GPU by {name}); "
        f"lowering it to {float(now):g} would uncount what it still holds: delete the pod and create it again "
        f"(policy {owner.name})"
    )
    return Verdict(owner.name, "quota.boundShare", f"metadata.annotations.{name}", message, Action.DENY)


def _joined_by_update(
    matched: tuple[GPUPolicy, ...], request: RequestInfo, policy_set: PolicySet, cluster: ClusterState
) -> frozenset[str]:
    """The quota policies an UPDATE moves the pod under (its labels, annotations, anything a
    match reads changed): the pod is new to their budgets, and judged there as a CREATE. Without
    an old version to read, none (the API server always sends its stored object)."""
    if request.operation is not Operation.UPDATE or not isinstance(request.old_object, dict):
        return frozenset()
    now = {p.name for p in matched if p.quota is not None}
    if not now:
        return frozenset()
    try:
        before = applicable(request.old_object, policy_set, request, cluster)
    except InputError:  # an old version the engine cannot read held nothing it can name
        return frozenset(now)
    if before is None:  # out of scope before: it reached no GPU, so held no budget
        return frozenset(now)
    return frozenset(now.difference(p.name for p in before.policies))


def validate_ephemeral(raw: JSON, policy_set: PolicySet, request: RequestInfo, cluster: ClusterState) -> Decision:
    """pods/ephemeralcontainers: the device access of the ephemeral containers, as of any other,
    and the rules, whose CEL sees the pod with its debug containers (the caller ratchets: what the
    pod earned before this update only warns)."""
    applies = applicable(raw, policy_set, request, cluster)
    if applies is None:
        return Decision(True)
    view, data, matched = applies.view, applies.data, applies.policies
    subject = subject_of(raw, applies.namespace)
    found = check_security(view, matched, only="spec.ephemeralContainers")
    for policy in matched:
        found.extend(check_rules(policy, data))
    verdicts = [v.about(subject) for v in found]
    allowed = not any(v.action is Action.DENY for v in verdicts)
    return Decision(allowed, tuple(verdicts), policies=tuple(p.name for p in matched))


def ratchet(now: Decision, before: Decision) -> Decision:
    """An UPDATE is not denied for what the object already was (ValidatingAdmissionPolicy's
    ratcheting): a denial the old object earned too (same policy, rule and field) becomes a
    warning, so controllers can still remove finalizers, add labels, finish. (Budgets settled
    later judge only what the update adds: the old object never earned one of those.)"""
    old = {(v.policy, v.rule, v.path) for v in before.denials}
    if not old:
        return now
    verdicts = tuple(v.excused() if (v.policy, v.rule, v.path) in old else v for v in now.verdicts)
    return now._replace(allowed=not any(v.action is Action.DENY for v in verdicts), verdicts=verdicts)
