"""Quota checks: the pod's usage on top of what its scope already holds, against every limit.

Current usage comes from a UsageSource: the offline command fills it from --cluster-state, the
webhook from the cluster. Only dimensions the pod actually asks for can deny it, as with
Kubernetes ResourceQuota.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Protocol

from policies.judge.usage import Usage
from policies.judge.verdict import Verdict
from policies.model.policy import Action, GPUPolicy, Limits, Quota, QuotaScope

NEAR_LIMIT = Fraction(4, 5)
ONE = Fraction(1)


class UsageSource(Protocol):
    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        """What pods already admitted under `policy` hold in `scope` (a namespace, or "" for policy-wide)."""
        ...


class NoUsage:
    def usage(self, policy: GPUPolicy, scope: str) -> Usage:
        return Usage()


def scope_of(quota: Quota, namespace: str) -> str:
    return namespace if quota.scope is QuotaScope.NAMESPACE else ""


def scope_label(policy: GPUPolicy, quota: Quota, namespace: str) -> str:
    """How messages name the budget: its namespace, or the policy for a shared one."""
    return namespace if quota.scope is QuotaScope.NAMESPACE else f"policy-wide {policy.name}"


Amount = Fraction | int


def dimensions(
    limits: Limits, usage: Usage, shared_weight: Fraction = ONE
) -> Iterator[tuple[str, str, Amount, Amount]]:
    """(name, field path, amount in usage, limit) for every limit that is set; shares of a device
    weigh `shared_weight` of it in GPU-equivalents.

    Counts stay ints (Fraction arithmetic costs ten times more); only GPU-equivalents are fractions.
    """
    if limits.gpu_equivalents is not None:
        held = usage.equivalents(shared_weight) if usage.shared_equivalents else usage.gpu_equivalents
        yield "gpuEquivalents", "gpuEquivalents", held, limits.gpu_equivalents
    for profile, limit in limits.slices:
        yield f"slices {profile}", f"slices.{profile}", usage.slices.get(profile, 0), limit
    if limits.gpus is not None:
        yield "gpus", "gpus", usage.gpus, limits.gpus
    if limits.pods is not None:
        yield "pods", "pods", usage.pods, limits.pods


def _exceeds(amount: Amount, limit: Amount) -> bool:
    """amount > limit, by cross-multiplying numerators: Fraction's own operators cost ten times more."""
    return amount.numerator * limit.denominator > limit.numerator * amount.denominator


def _plus(a: Amount, b: Amount) -> Amount:
    if a.denominator == 1 and b.denominator == 1:
        return a.numerator + b.numerator
    return Fraction(a.numerator * b.denominator + b.numerator * a.denominator, a.denominator * b.denominator)


def _near(amount: Amount, limit: Amount) -> bool:
    """amount >= NEAR_LIMIT x limit, for a positive limit."""
    if limit.numerator <= 0:
        return False
    left = amount.numerator * limit.denominator * NEAR_LIMIT.denominator
    return left >= limit.numerator * amount.denominator * NEAR_LIMIT.numerator


def held_in(usage: Usage, name: str, shared_weight: Fraction = ONE) -> Amount:
    """What `usage` holds of the dimension `dimensions` names `name`."""
    if name == "gpuEquivalents":
        return usage.equivalents(shared_weight) if usage.shared_equivalents else usage.gpu_equivalents
    if name == "pods":
        return usage.pods
    if name == "gpus":
        return usage.gpus
    return usage.slices.get(name.removeprefix("slices "), 0)


def check_quota(
    policy: GPUPolicy, quota: Quota, namespace: str, pod: Usage, current: Usage, added: Usage | None = None
) -> list[Verdict]:
    """Per-pod caps on `pod`; budgets on what it adds to `current` (`added`: an UPDATE's growth,
    else the whole pod). Only the dimensions the pod asks for are read of `current`."""
    verdicts: list[Verdict] = []
    weight = quota.shared_weight
    if quota.per_pod is not None:
        for name, path, asked, limit in dimensions(quota.per_pod, pod, weight):
            if _exceeds(asked, limit):
                message = f"pod asks for {name} {asked}, over the per-pod cap of {limit}"
                verdicts.append(
                    _verdict(policy, quota, namespace, f"perPod.{name.split()[0]}", f"perPod.{path}", message)
                )
    for name, path, asked, limit in dimensions(quota.limits, pod if added is None else added, weight):
        if asked.numerator <= 0:
            continue
        used = held_in(current, name, weight)
        after = _plus(used, asked)
        if _exceeds(after, limit):
            message = f"{name} {used} + {asked} exceeds {limit}"
            verdicts.append(_verdict(policy, quota, namespace, name.split()[0], f"limits.{path}", message))
        elif _near(after, limit):
            message = f"{name} {after} of {limit} in use with this pod, {limit - after} left"
            verdicts.append(_verdict(policy, quota, namespace, name.split()[0], f"limits.{path}", message, Action.WARN))
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
