"""What a workload's templates earn at apply time, beside what each pod earns: budgets its
replicas would overrun together (a warning, as pods are admitted one by one later), budgets one
pod overruns alone (every pod would be denied), the pods a scale-up adds (the policy's action, as
they are made at once), and who makes the pods where an operator does."""

from __future__ import annotations

from collections.abc import Iterator

from policies.judge.claim_usage import SharedClaims
from policies.judge.quota import Amount, UsageSource, dimensions, scope_label, scope_of
from policies.judge.usage import EMPTY, Usage
from policies.judge.verdict import Verdict
from policies.model.policy import Action, GPUPolicy, Quota
from policies.model.workloads import WorkloadKind
from policies.review.document import JSON, Change


def _overruns(
    policies: tuple[GPUPolicy, ...],
    namespace: str,
    usage: Usage,
    count: int,
    usage_source: UsageSource,
    shared: SharedClaims = (),
) -> Iterator[tuple[GPUPolicy, Quota, str, str, Amount, Amount, Amount, Amount, Amount]]:
    """(policy, quota, dimension, limit path, held, asked a pod, asked once, total, limit) of every
    budget that `count` more pods holding `usage` each, and the named claims `shared` they all
    name (charged once, where the budget holds none of them yet), would overrun."""
    for policy in policies:
        quota = policy.quota
        if quota is None:
            continue
        scope = scope_of(quota, namespace)
        current = usage_source.usage(policy, scope)
        held_claims = usage_source.shared_claims(policy, scope) if shared else ()
        once = EMPTY
        for key, claim in shared:
            if key not in held_claims:
                once = once + claim
        held = {name: amount for name, _, amount, _ in dimensions(quota.limits, current, quota.shared_weight)}
        single = {name: amount for name, _, amount, _ in dimensions(quota.limits, once, quota.shared_weight)}
        for name, path, asked, limit in dimensions(quota.limits, usage, quota.shared_weight):
            total = held[name] + asked * count + single[name]
            if (asked > 0 or single[name] > 0) and total > limit:
                yield policy, quota, name, path, held[name], asked, single[name], total, limit


def replica_warnings(
    policies: tuple[GPUPolicy, ...],
    namespace: str,
    usage: Usage,
    replicas: int,
    usage_source: UsageSource,
    running: tuple[int, Usage] | None = None,
    shared: SharedClaims = (),
) -> list[Verdict]:
    """Where `replicas` pods of this template would exceed a quota, say so with the numbers.
    `usage`: what one pod holds but the named claims `shared`, which every replica names and a
    budget charges once, as at run time. `running`: on an UPDATE, the replicas and pod usage of
    the template as it was, whose pods `usage_source` holds already: they are counted once, so
    re-applying an unchanged workload or labelling it warns of nothing, and 3 -> 6 replicas counts
    3 more."""
    if running is None:
        if replicas <= 1 or (usage.empty and not shared):
            return []
        found: list[Verdict] = []
        for policy, quota, name, path, held, asked, once, total, limit in _overruns(
            policies, namespace, usage, replicas, usage_source, shared
        ):
            told = f"{held} + {replicas}x{asked}" + (f" + {once} shared once" if once else "")
            found.append(
                Verdict(
                    policy.name,
                    f"quota.{name.split()[0]}",
                    f"spec.quota.limits.{path}",
                    f"{scope_label(policy, quota, namespace)}: {replicas} replicas would hold {name} {told} = "
                    f"{total}, over {limit} (policy {policy.name})",
                    Action.WARN,
                )
            )
        return found
    # As the pods that run hold them: compared with the template as it was, claims and all.
    usage = usage + _all(shared)
    was, before = running
    verdicts: list[Verdict] = []
    for policy, quota, name, path, held, asked, old, limit in _changes(
        policies, namespace, usage, before, usage_source
    ):
        counted = min(was * old, held)  # what the old replicas hold of it (none where they were never let in)
        total = held - counted + replicas * asked
        if asked <= 0 or total <= held or total <= limit:
            continue  # the update adds nothing to the budget, or fits
        same = old == asked and counted == was * old  # the template kept its pods' usage: say the difference
        told = f"{held} + {replicas - was}x{asked}" if same else f"{held} - {counted} + {replicas}x{asked}"
        verdicts.append(
            Verdict(
                policy.name,
                f"quota.{name.split()[0]}",
                f"spec.quota.limits.{path}",
                f"{scope_label(policy, quota, namespace)}: {replicas} replicas (from {was}) would hold {name} "
                f"{told} = {total}, over {limit} (policy {policy.name})",
                Action.WARN,
            )
        )
    return verdicts


def _all(shared: SharedClaims) -> Usage:
    total = EMPTY
    for _, claim in shared:
        total = total + claim
    return total


def _changes(
    policies: tuple[GPUPolicy, ...], namespace: str, usage: Usage, before: Usage, usage_source: UsageSource
) -> Iterator[tuple[GPUPolicy, Quota, str, str, Amount, Amount, Amount, Amount]]:
    """(policy, quota, dimension, limit path, held, asked a pod now, asked a pod before, limit)."""
    for policy in policies:
        quota = policy.quota
        if quota is None:
            continue
        current = usage_source.usage(policy, scope_of(quota, namespace))
        held = {name: amount for name, _, amount, _ in dimensions(quota.limits, current, quota.shared_weight)}
        old = {name: amount for name, _, amount, _ in dimensions(quota.limits, before, quota.shared_weight)}
        for name, path, asked, limit in dimensions(quota.limits, usage, quota.shared_weight):
            yield policy, quota, name, path, held[name], asked, old[name], limit


def scale_verdicts(
    policies: tuple[GPUPolicy, ...],
    namespace: str,
    usage: Usage,
    was: int,
    now: int,
    usage_source: UsageSource,
    shared: SharedClaims = (),
) -> list[Verdict]:
    """Scaling from `was` to `now` replicas adds `now - was` pods holding `usage` each (and the
    named claims `shared`, charged once where no pod holds them yet), made at once: a budget they
    overrun is the policy's own action (deny, or warn), as their pods will be. What the running
    replicas hold is in `usage_source` already, so only the pods added count."""
    added = now - was
    if added <= 0 or (usage.empty and not shared):
        return []
    return [
        Verdict(
            policy.name,
            f"quota.{name.split()[0]}",
            f"spec.quota.limits.{path}",
            f"{scope_label(policy, quota, namespace)}: scaling from {was} to {now} adds {added} pods, "
            f"{name} {held} + {added}x{asked} = {total}, over {limit} (policy {policy.name})",
            Action.DENY if quota.action is Action.DENY else Action.WARN,
        )
        for policy, quota, name, path, held, asked, _, total, limit in _overruns(
            policies, namespace, usage, added, usage_source, shared
        )
    ]


def over_alone(policies: tuple[GPUPolicy, ...], usage: Usage) -> frozenset[tuple[str, str]]:
    """(policy, rule) of every budget one pod holding `usage` overruns by itself, whatever else
    is charged: every such pod will be denied."""
    return frozenset(
        (policy.name, f"quota.{name.split()[0]}")
        for policy in policies
        if policy.quota is not None
        for name, _, asked, limit in dimensions(policy.quota.limits, usage, policy.quota.shared_weight)
        if asked > limit
    )


def made_by_note(path: str, made_by: str, changes: tuple[Change, ...]) -> str:
    """Where an operator, not a template of the object, makes the pods: who, and what the pod
    webhook will do to them when they come."""
    then = "make these changes: " + "; ".join(str(c) for c in changes) if changes else "admit them as judged here"
    return f"{path}: {made_by}; the pod webhook will then {then}"


def unread(raw: JSON, entry: WorkloadKind) -> Verdict:
    """A workload at a version whose shape gpu-admission does not read: skipped, and said so (never
    "allowed, charged 0"); its pods are judged when its operator makes them."""
    versions = ", ".join(f"{entry.group}/{v}" for v in entry.versions)
    message = (
        f"{entry.kind} {raw.get('apiVersion')} is not judged: gpu-admission reads {versions} only; "
        "its pods are judged as they are made"
    )
    return Verdict("gpu-admission", "workloads.version", "apiVersion", message, Action.WARN)


def is_budget(verdict: Verdict) -> bool:
    """A verdict on a budget (what other pods hold counts), not a per-pod cap or a claim's."""
    return verdict.rule.startswith("quota.") and ".perPod." not in verdict.rule and verdict.rule != "quota.claims"


def at_apply(verdict: Verdict, certain: frozenset[tuple[str, str]]) -> Verdict:
    """A template's quota verdict at apply time: a warning, unless one pod alone overruns."""
    if not is_budget(verdict):
        return verdict
    if (verdict.policy, verdict.rule) in certain and verdict.action is Action.DENY:
        return verdict.acting(Action.DENY, f"every pod of this template would be denied: {verdict.message}")
    return verdict.acting(Action.WARN)
