"""Quota checks: the pod's usage on top of what its scope already holds, against every limit.

Current usage comes from a UsageSource: the offline command fills it from --cluster-state, the
webhook from the cluster. Only dimensions the pod actually asks for can deny it, as with
Kubernetes ResourceQuota.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Protocol

from policies.model import Action, GPUPolicy, Limits, Quota, QuotaScope
from policies.usage import Usage
from policies.verdict import Verdict

NEAR_LIMIT = Fraction(4, 5)


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


def dimensions(limits: Limits, usage: Usage) -> Iterator[tuple[str, str, Amount, Amount]]:
    """(name, field path, amount in usage, limit) for every limit that is set.

    Counts stay ints (Fraction arithmetic costs ten times more); only GPU-equivalents are fractions.
    """
    if limits.gpu_equivalents is not None:
        yield "gpuEquivalents", "gpuEquivalents", usage.gpu_equivalents, limits.gpu_equivalents
    for profile, limit in limits.slices:
        yield f"slices {profile}", f"slices.{profile}", usage.slices.get(profile, 0), limit
    if limits.gpus is not None:
        yield "gpus", "gpus", usage.gpus, limits.gpus
    if limits.pods is not None:
        yield "pods", "pods", usage.pods, limits.pods


def check_quota(policy: GPUPolicy, quota: Quota, namespace: str, pod: Usage, current: Usage) -> list[Verdict]:
    label = scope_label(policy, quota, namespace)
    action = Action.DENY if quota.action is Action.DENY else Action.WARN
    verdicts: list[Verdict] = []
    if quota.per_pod is not None:
        for name, path, asked, limit in dimensions(quota.per_pod, pod):
            if asked > limit:
                verdicts.append(
                    Verdict(
                        policy.name,
                        f"quota.perPod.{name.split()[0]}",
                        f"spec.quota.perPod.{path}",
                        f"{label}: pod asks for {name} {asked}, over the per-pod cap of {limit} (policy {policy.name})",
                        action,
                    )
                )
    held = {name: amount for name, _, amount, _ in dimensions(quota.limits, current)}
    for name, path, asked, limit in dimensions(quota.limits, pod):
        if asked <= 0:
            continue
        used = held[name]
        after = used + asked
        rule = f"quota.{name.split()[0]}"
        field = f"spec.quota.limits.{path}"
        if after > limit:
            verdicts.append(
                Verdict(
                    policy.name,
                    rule,
                    field,
                    f"{label}: {name} {used} + {asked} exceeds {limit} (policy {policy.name})",
                    action,
                )
            )
        elif limit > 0 and after * NEAR_LIMIT.denominator >= limit * NEAR_LIMIT.numerator:
            verdicts.append(
                Verdict(
                    policy.name,
                    rule,
                    field,
                    f"{label}: {name} {after} of {limit} in use with this pod, "
                    f"{limit - after} left (policy {policy.name})",
                    Action.WARN,
                )
            )
    return verdicts
