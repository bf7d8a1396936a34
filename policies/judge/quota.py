"""Quota checks: the pod's usage on top of what its scope already holds, against every limit.

Current usage comes from a UsageSource: the offline command fills it from --cluster-state, the
webhook from the cluster. Only dimensions the pod actually asks for can deny it, as with
Kubernetes ResourceQuota.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from fractions import Fraction
from typing import Protocol

from policies.judge.usage import EMPTY, Usage
from policies.judge.verdict import Verdict
from policies.model.policy import Action, Bound, GPUPolicy, Limits, Quota, QuotaScope

NEAR_LIMIT = Fraction(4, 5)
ONE = Fraction(1)


class UsageSource(Protocol):
    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        """What pods already admitted under `policy` hold in `scope` (a namespace, or "" for policy-wide)."""
        ...

    def shared_claims(self, policy: GPUPolicy, scope: str) -> Collection[str]:
        """The named ResourceClaims ("namespace/name") that usage charges already."""
        ...


class NoUsage:
    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        return EMPTY  # a Usage is never changed: one empty one serves every read

    def shared_claims(self, policy: GPUPolicy, scope: str) -> Collection[str]:
        return ()


def scope_of(quota: Quota, namespace: str) -> str:
    return namespace if quota.scope is QuotaScope.NAMESPACE else ""


def scope_label(policy: GPUPolicy, quota: Quota, namespace: str) -> str:
    """How messages name the budget: its namespace, or the policy for a shared one."""
    return namespace if quota.scope is QuotaScope.NAMESPACE else f"policy-wide {policy.name}"


Amount = Fraction | int


def amounts(limits: Limits, usage: Usage, shared_weight: Fraction = ONE) -> dict[str, tuple[Amount, Amount]]:
    """For every limit that is set, by name: (amount in usage, limit) (`dimensions`, at once)."""
    return {name: (held, limit) for name, _, held, limit in dimensions(limits, usage, shared_weight)}


def dimensions(
    limits: Limits, usage: Usage, shared_weight: Fraction = ONE
) -> Iterator[tuple[str, str, Amount, Amount]]:
    """(name, field path, amount in usage, limit) for every limit that is set; shares of a device
    weigh `shared_weight` of it in GPU-equivalents."""
    for bound in limits.bounds:
        numerator, denominator = _ratio(usage, bound, shared_weight)
        held = Fraction(numerator, denominator) if bound.kind == "gpuEquivalents" else numerator
        yield bound.name, bound.path, held, bound.limit


def _ratio(usage: Usage, bound: Bound, shared_weight: Fraction) -> tuple[int, int]:
    """What `usage` holds of `bound`'s dimension, as (numerator, denominator): counts stay ints."""
    kind = bound.kind
    if kind == "gpuEquivalents":
        if usage.shared_ratio[0]:
            return usage.equivalents(shared_weight).as_integer_ratio()
        return usage.owned_ratio
    if kind == "pods":
        return usage.pods, 1
    if kind == "gpus":
        return usage.gpus, 1
    return usage.slices.get(bound.profile, 0), 1


def _amount(numerator: int, denominator: int) -> Amount:
    """For messages: an int where it is one, as Fraction prints it."""
    return numerator if denominator == 1 else Fraction(numerator, denominator)


def check_quota(
    policy: GPUPolicy, quota: Quota, namespace: str, pod: Usage, current: Usage, added: Usage | None = None
) -> list[Verdict]:
    """Per-pod caps on `pod`; budgets on what it adds to `current` (`added`: an UPDATE's growth,
    else the whole pod). Only the dimensions the pod asks for are read of `current`.

    Amounts are compared as integer ratios, cross-multiplied: this runs for every matching policy
    of every review, and Fraction arithmetic would be most of its cost."""
    verdicts: list[Verdict] = []
    weight = quota.shared_weight
    if quota.per_pod is not None:
        for bound in quota.per_pod.bounds:
            n, d = _ratio(pod, bound, weight)
            if n * bound.denominator > bound.numerator * d:
                message = f"pod asks for {bound.name} {_amount(n, d)}, over the per-pod cap of {bound.limit}"
                rule, path = f"perPod.{bound.kind}", f"perPod.{bound.path}"
                verdicts.append(_verdict(policy, quota, namespace, rule, path, message))
    charged = pod if added is None else added
    for bound in quota.limits.bounds:
        asked_n, asked_d = _ratio(charged, bound, weight)
        if asked_n <= 0:
            continue
        used_n, used_d = _ratio(current, bound, weight)
        if used_d == asked_d:
            after_n, after_d = used_n + asked_n, used_d
        else:
            after_n, after_d = used_n * asked_d + asked_n * used_d, used_d * asked_d
        limit_n, limit_d = bound.numerator, bound.denominator
        if after_n * limit_d > limit_n * after_d:
            used, asked = _amount(used_n, used_d), _amount(asked_n, asked_d)
            message = f"{bound.name} {used} + {asked} exceeds {bound.limit}"
            verdicts.append(_verdict(policy, quota, namespace, bound.kind, f"limits.{bound.path}", message))
        elif limit_n > 0 and after_n * limit_d * NEAR_LIMIT.denominator >= limit_n * after_d * NEAR_LIMIT.numerator:
            after = Fraction(after_n, after_d)
            message = f"{bound.name} {after} of {bound.limit} in use with this pod, {bound.limit - after} left"
            rule, path = bound.kind, f"limits.{bound.path}"
            verdicts.append(_verdict(policy, quota, namespace, rule, path, message, Action.WARN))
    return verdicts


def _verdict(
    policy: GPUPolicy, quota: Quota, namespace: str, rule: str, path: str, message: str, action: Action | None = None
) -> Verdict:
    label = scope_label(policy, quota, namespace)
    if action is None:
        action = Action.DENY if quota.action is Action.DENY else Action.WARN
    return Verdict(
        policy.name, f"quota.{rule}", f"spec.quota.{path}", f"{label}: {message} (policy {policy.name})", action
    )
