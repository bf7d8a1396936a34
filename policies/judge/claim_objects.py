"""DRA ResourceClaims and ResourceClaimTemplates judged at their own creation (and update), by the
policies that hold for every pod of their namespace: any pod there may name them, so what those
policies say of a GPU request holds for the claim before any pod does
(policies.judge.claim_checks), and no claim may ask more than one pod may hold (per-pod caps) or
more than a whole budget (a limit it overruns by itself). Policies that pick pods by labels or a
condition judge the claim when such a pod names it (policies.judge.validation).

A template's `spec.spec` is the claim each pod gets. Claims Kubernetes makes (from a template for
a pod, or for a pod's DRA-served extended resources) are judged like any other: their annotations
are written by whoever creates the object, so they excuse nothing.

The Namespace label that lets claims ask adminAccess is judged here too
(`judge_admin_access_label`).
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.errors import InputError
from policies.gpu.claims import claim_demand
from policies.gpu.placement import ANYWHERE
from policies.judge.claim_checks import claim_checks
from policies.judge.claim_usage import awaiting_prefix, claim_key, unbounded_verdict
from policies.judge.device_charge import demand_charge
from policies.judge.quota import UsageSource, check_quota, scope_of
from policies.judge.security import applying_to_every_pod, settings
from policies.judge.usage import EMPTY, Usage
from policies.judge.validation import Decision, subject_of
from policies.judge.verdict import Verdict
from policies.model.policy import Action, DeviceCheck
from policies.model.policyset import PolicySet
from policies.review.cluster import ClusterState
from policies.review.document import JSON

CLAIM_GROUP = "resource.k8s.io/"
CLAIM_OBJECT_KINDS = ("ResourceClaim", "ResourceClaimTemplate")


def is_claim_object(api_version: object, kind: object) -> bool:
    return kind in CLAIM_OBJECT_KINDS and isinstance(api_version, str) and api_version.startswith(CLAIM_GROUP)


def judge_claim_object(
    raw: JSON,
    kind: str,
    namespace: str | None,
    policy_set: PolicySet,
    cluster: ClusterState,
    usage_source: UsageSource | None = None,
) -> Decision:
    """The verdict on a ResourceClaim or ResourceClaimTemplate in `namespace` (the API server's
    word; the object's own, or `default`, where none is given, as for `gpu-admission validate`).
    `usage_source`: the budgets as they stand, for a claim being created (see `_named_already`)."""
    metadata = raw.get("metadata")
    if not namespace:
        written = metadata.get("namespace") if isinstance(metadata, Mapping) else None
        namespace = written if isinstance(written, str) and written else "default"
    spec = raw.get("spec")
    if kind == "ResourceClaimTemplate":
        if not isinstance(spec, Mapping):
            raise InputError("spec", "must be an object")
        demand = claim_demand(spec.get("spec"), "spec.spec")
    else:
        demand = claim_demand(spec)
    policies = applying_to_every_pod(policy_set.in_namespace(namespace, cluster.namespace_labels(namespace)))
    if not demand.asks_devices:
        return Decision(True, policies=tuple(p.name for p in policies))
    classes = cluster.device_classes
    usage, unbounded = demand_charge(demand, classes, cluster.devices, ANYWHERE, policy_set.catalog)
    verdicts = []
    if usage_source is not None and not usage.is_zero:
        verdicts += _named_already(raw, kind, namespace, usage, policy_set, usage_source)
    if not policies and not verdicts:
        return Decision(True)
    verdicts += claim_checks(demand, policies, classes, cluster.devices, policy_set.catalog)
    if not usage.is_zero:
        usage = usage.with_pods(1)  # the pod that names it is one pod
    for policy in policies:
        quota = policy.quota
        if quota is None:
            continue
        verdicts += [unbounded_verdict(policy, f"request {name}", "spec") for name in unbounded]
        if usage.is_zero:
            continue
        # Against an empty budget: only what the claim alone overruns, whatever else is held.
        found = check_quota(policy, quota, namespace, usage, EMPTY)
        verdicts += [_as_claim(v) for v in found if v.action is Action.DENY]
    subject = subject_of(raw, namespace)
    verdicts = [v.about(subject) for v in verdicts]
    allowed = not any(v.action is Action.DENY for v in verdicts)
    return Decision(allowed, tuple(verdicts), usage, tuple(p.name for p in policies))


def _named_already(
    raw: JSON, kind: str, namespace: str, usage: Usage, policy_set: PolicySet, usage_source: UsageSource
) -> list[Verdict]:
    """A claim made while pods already name it (deleted under a pending pod and made again, or
    made after its pods): it adds what it can allocate to every budget those pods are charged
    to, at once, and is judged against them as they stand. Pods naming no claim yet are counted
    with their budgets, so a claim made again for 8 GPUs under a limit of 2 is denied here. A
    template is judged likewise for each pod still waiting for a claim to be made from it (its
    template deleted before the claim was made: a pod waiting for its PodGroup)."""
    metadata = raw.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        return []  # generateName: no pod can name it yet
    template = kind == "ResourceClaimTemplate"
    key = awaiting_prefix(namespace, name) if template else claim_key(namespace, name)
    adds = usage.with_pods(0)  # its pods are counted already
    found: list[Verdict] = []
    for policy in policy_set.policies:
        quota = policy.quota
        if quota is None:
            continue
        scope = scope_of(quota, namespace)
        held = usage_source.shared_claims(policy, scope)
        waiting = sum(1 for k in held if k.startswith(key)) if template else int(key in held)
        if waiting:
            current = usage_source.usage(policy, scope)
            verdicts = check_quota(policy, quota, namespace, adds.times(waiting), current)
            found += [_named(v) for v in verdicts if not v.rule.startswith("quota.perPod.")]
    return found


def _named(verdict: Verdict) -> Verdict:
    """A budget's verdict on a claim that pods already name (its caps are judged as any claim's)."""
    message = f"pods here name this claim already, so it adds at once: {verdict.message}"
    return Verdict(verdict.policy, verdict.rule, verdict.path, message, verdict.action)


def _as_claim(verdict: Verdict) -> Verdict:
    """A quota verdict said of the claim: every pod that names it holds at least this much."""
    message = verdict.message.replace("pod asks for", "a pod naming this claim would hold", 1)
    if "exceeds" in message:
        message = f"by itself: {message}"
    return Verdict(verdict.policy, verdict.rule, verdict.path, message, verdict.action)


ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


def is_namespace(api_version: object, kind: object) -> bool:
    return kind == "Namespace" and api_version in ("v1", None)


def judge_admin_access_label(raw: JSON, policy_set: PolicySet) -> Decision:
    """A Namespace labelled `resource.kubernetes.io/admin-access: "true"`, which is all Kubernetes
    asks before it stores adminAccess claims there (whoever may label the namespace may set it):
    denied where the policies that reach the namespace (by its name and its new labels) and hold
    for every pod there do not allow `draAdminAccess`."""
    metadata = raw.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    labels = metadata.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    name = metadata.get("name")
    if labels.get(ADMIN_ACCESS_LABEL) != "true" or not isinstance(name, str):
        return Decision(True)
    texts = {str(k): str(v) for k, v in labels.items()}
    policies = applying_to_every_pod(policy_set.in_namespace(name, texts))
    if not policies:
        return Decision(True)
    spec, owner = settings(policies)
    if DeviceCheck.DRA_ADMIN_ACCESS in spec.allow:
        return Decision(True, policies=tuple(p.name for p in policies))
    message = (
        f"label {ADMIN_ACCESS_LABEL}=true lets every claim of the namespace ask adminAccess, which reaches "
        f"devices already allocated to others, past every quota (policy {owner})"
    )
    rule = f"security.{DeviceCheck.DRA_ADMIN_ACCESS.value}"
    verdict = Verdict(owner.split(",")[0], rule, f"metadata.labels.{ADMIN_ACCESS_LABEL}", message, spec.action)
    verdict = verdict.about(f"Namespace {name}")
    return Decision(spec.action is not Action.DENY, (verdict,), policies=tuple(p.name for p in policies))
