"""A pod's DRA claims, charged in the units quotas count.

Every claim the pod names is allocated when it is scheduled, whichever containers use it, so each
is charged: what its requests can allocate (policies.gpu.claims), each request at the most of its
alternatives, dimension by dimension, where the pod may run. A claim shared by several pods is
charged to each (the most any of them can reach). What cannot be known is said, not guessed:
a claim the cluster does not have (`missing`), and requests for all the devices a selector
admits (`unbounded`), which no budget can hold.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from policies.gpu.catalog import Catalog
from policies.judge.usage import EMPTY, Usage, charged
from policies.judge.verdict import Verdict
from policies.model.policy import Action, GPUPolicy
from policies.review.cluster import ClusterState
from policies.review.pod import ClaimRef, PodView


@dataclass(frozen=True, slots=True)
class ClaimsCharge:
    usage: Usage = EMPTY
    missing: tuple[ClaimRef, ...] = ()
    unbounded: tuple[tuple[ClaimRef, str], ...] = ()  # (claim, request name)


NO_CLAIMS = ClaimsCharge()


def _most(a: Usage, b: Usage) -> Usage:
    slices = {k: max(a.slices.get(k, 0), b.slices.get(k, 0)) for k in a.slices.keys() | b.slices.keys()}
    return Usage(
        max(a.gpu_equivalents, b.gpu_equivalents),
        slices,
        max(a.gpus, b.gpus),
        max(a.pods, b.pods),
        max(a.shared_equivalents, b.shared_equivalents),
    )


def claims_charge(pod: PodView, namespace: str, cluster: ClusterState, catalog: Catalog) -> ClaimsCharge:
    """What the pod's claims in `namespace` (the API server's word) can allocate."""
    if not pod.claims:
        return NO_CLAIMS
    usage = EMPTY
    missing: list[ClaimRef] = []
    unbounded: list[tuple[ClaimRef, str]] = []
    for ref in pod.claims:
        demand = cluster.claim_demand(namespace, ref.template, ref.name)
        if demand is None:
            missing.append(ref)
            continue
        unbounded += [(ref, request) for request in demand.unbounded]
        for alternatives in demand.requests:
            most = EMPTY
            for ask in alternatives:
                most = _most(most, charged(dict(ask), pod.placement, catalog))
            usage = usage + most
    return ClaimsCharge(usage, tuple(missing), tuple(unbounded))


def with_claims(base: Usage, charge: ClaimsCharge) -> Usage:
    """A pod's usage with what its claims can allocate: one pod, however it holds its GPUs."""
    if charge.usage.is_zero:
        return base
    total = base + charge.usage
    return total if total.pods else replace(total, pods=1)


def _kind(ref: ClaimRef) -> str:
    return f"{'ResourceClaimTemplate' if ref.template else 'ResourceClaim'} {ref.name}"


def claim_verdicts(charge: ClaimsCharge, policies: tuple[GPUPolicy, ...], cluster: ClusterState) -> list[Verdict]:
    """What the quotas of `policies` say of claims they cannot charge: one not found is denied
    where the cluster's claims are all known (create the claim first), warned of where they are
    not (offline); a request for every device is denied as the quota's action says."""
    if not (charge.missing or charge.unbounded):
        return []
    verdicts = []
    for policy in policies:
        if policy.quota is None:
            continue
        rule = "quota.claims"
        for ref in charge.missing:
            action = Action.DENY if cluster.knows_claims else Action.WARN
            told = "not found: create it before the pod" if cluster.knows_claims else "not known here: not charged"
            verdicts.append(Verdict(policy.name, rule, ref.path, f"{_kind(ref)} {told} (policy {policy.name})", action))
        for ref, request in charge.unbounded:
            message = (
                f"{_kind(ref)} request {request} asks allocationMode All, every GPU its selectors admit, "
                f"which no budget can hold: ask a count (policy {policy.name})"
            )
            verdicts.append(Verdict(policy.name, rule, ref.path, message, policy.quota.action))
    return verdicts
