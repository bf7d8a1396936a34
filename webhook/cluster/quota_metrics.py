"""The quota view of a replica: what its counters hold per policy and scope, for the
`gpu_admission_quota_*` metrics (computed at scrape time, so a removed policy or an emptied
namespace leaves no stale series)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from policies.judge.quota_view import QuotaLine, quota_lines, scopes
from policies.judge.usage import Usage
from policies.model.policy import GPUPolicy
from policies.model.policyset import PolicySet
from webhook.cluster.live import ClusterView


def replica_quota_lines(view: ClusterView, policy_set: PolicySet | None) -> list[QuotaLine]:
    if policy_set is None:
        return []
    tracker = view.usage
    counted = tracker.counted()
    held = counted.held()
    namespaces = {scope: view.namespaces.known(scope) for _, scope in held if scope}

    class Reserved:
        def usage(self, policy: GPUPolicy, scope: str) -> Usage:
            return tracker.reserved(policy, scope)

    return quota_lines(scopes(policy_set, namespaces, held), counted, Reserved())


class QuotaCollector(Collector):
    """gpu_admission_quota_{used,reserved,limit}{policy, scope, dimension}; per-pod caps are
    limits only (`dimension="per pod ..."`)."""

    def __init__(self, lines: Callable[[], list[QuotaLine]]) -> None:
        self._lines = lines

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["policy", "scope", "dimension"]
        used = GaugeMetricFamily("gpu_admission_quota_used", "Held by counted pods, per quota dimension", labels=labels)
        reserved = GaugeMetricFamily(
            "gpu_admission_quota_reserved", "Admitted, not yet seen as pods, per quota dimension", labels=labels
        )
        limit = GaugeMetricFamily("gpu_admission_quota_limit", "The quota's limit, per dimension", labels=labels)
        for line in self._lines():
            values = [line.policy, line.scope or "(policy-wide)", line.dimension]
            limit.add_metric(values, float(line.limit))
            if not line.per_pod:
                used.add_metric(values, float(line.used))
                reserved.add_metric(values, float(line.reserved))
        yield from (used, reserved, limit)
