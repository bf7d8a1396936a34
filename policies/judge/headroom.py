"""What a tenant may still spend: per policy and scope, each limit with what is used, reserved and
left (`gpu-admission quota`, the quota metrics).

Which scopes are shown: a policy-wide budget once; a namespace budget for each namespace the
policy may match (its namespaces and namespaceSelector; pod selectors and conditions decide
which pods count, not whether the namespace has a budget) and, without one asked for, only where
something is held: a cluster of a thousand namespaces does not print a thousand empty bars.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from policies.judge.quota import Amount, UsageSource, dimensions, scope_of
from policies.judge.usage import EMPTY, Usage
from policies.model.policy import GPUPolicy, QuotaScope
from policies.model.policyset import PolicySet

POLICY_WIDE = ""


@dataclass(frozen=True, slots=True)
class QuotaLine:
    policy: str
    scope: str  # the namespace, or "" for a policy-wide budget
    dimension: str  # gpuEquivalents, "slices 1g.10gb", gpus, pods; "per pod ..." for a per-pod cap
    used: Amount
    reserved: Amount
    limit: Amount

    @property
    def left(self) -> Amount:
        return max(self.limit - self.used - self.reserved, 0)

    @property
    def per_pod(self) -> bool:
        return self.dimension.startswith("per pod")


def scopes(
    policy_set: PolicySet,
    namespaces: Mapping[str, Mapping[str, str] | None],
    held: Iterable[tuple[str, str]],
    only: str | None = None,
) -> list[tuple[GPUPolicy, str]]:
    """(policy, scope) pairs to show: `only` a namespace, or every scope holding something."""
    holding = set(held)

    def admits(policy: GPUPolicy, namespace: str) -> bool:
        return any(p.name == policy.name for p in policy_set.in_namespace(namespace, namespaces.get(namespace)))

    found: list[tuple[GPUPolicy, str]] = []
    for policy in policy_set.policies:
        quota = policy.quota
        if quota is None:
            continue
        if quota.scope is QuotaScope.POLICY:
            if only is None or admits(policy, only):
                found.append((policy, POLICY_WIDE))
            continue
        candidates = [only] if only is not None else sorted(s for p, s in holding if p == policy.name)
        for namespace in candidates:
            if admits(policy, namespace):
                found.append((policy, scope_of(quota, namespace)))
    return found


def quota_lines(
    shown: Iterable[tuple[GPUPolicy, str]], used: UsageSource, reserved: UsageSource | None = None
) -> list[QuotaLine]:
    lines: list[QuotaLine] = []
    for policy, scope in shown:
        quota = policy.quota
        assert quota is not None
        held = used.usage(policy, scope)
        pending: Usage = reserved.usage(policy, scope) if reserved is not None else EMPTY
        pending_by = {name: amount for name, _, amount, _ in dimensions(quota.limits, pending, quota.shared_weight)}
        for name, _, amount, limit in dimensions(quota.limits, held, quota.shared_weight):
            lines.append(QuotaLine(policy.name, scope, name, amount, pending_by.get(name, 0), limit))
        if quota.per_pod is not None:
            for name, _, _, limit in dimensions(quota.per_pod, EMPTY):
                lines.append(QuotaLine(policy.name, scope, f"per pod {name}", 0, 0, limit))
    return lines


def amount_text(amount: Amount) -> str:
    if isinstance(amount, Fraction) and amount.denominator != 1:
        return f"{amount} ({float(amount):.2f})"
    return str(int(amount))


def bar(line: QuotaLine, width: int = 20) -> str:
    """`[#####++.......]`: used (#), reserved (+), left (.)."""
    if line.limit <= 0:
        return "[" + ("#" * width if line.used or line.reserved else "." * width) + "]"
    used = min(width, round(width * Fraction(line.used) / Fraction(line.limit)))
    reserved = min(width - used, round(width * Fraction(line.reserved) / Fraction(line.limit)))
    return "[" + "#" * used + "+" * reserved + "." * (width - used - reserved) + "]"
