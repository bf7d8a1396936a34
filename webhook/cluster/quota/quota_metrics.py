"""The quota view of a replica: what its counters hold per policy and scope, for the
`gpu_admission_quota_*` metrics (computed at scrape time, so a removed policy or an emptied
namespace leaves no stale series)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from policies import QuotaLine
from webhook.cluster.quota.shares.escrow import Escrow


class QuotaCollector(Collector):
    """gpu_admission_quota_{used,reserved,limit}{policy, scope, dimension}; per-pod caps are
    limits only (`dimension="per pod ..."`)."""

    def __init__(
        self, lines: Callable[[], list[QuotaLine]], escrow: Callable[[], Escrow | None] = lambda: None
    ) -> None:
        self._lines = lines
        self._escrow = escrow

    def collect(self) -> Iterator[Metric]:
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
        escrow = self._escrow()
        if escrow is not None:
            yield from share_families(escrow)


def share_families(escrow: Escrow) -> Iterator[Metric]:
    """This replica's shares of strict budgets (webhook.cluster.quota.shares.escrow), and how they moved."""
    labels = ["policy", "scope", "dimension"]
    text = "This replica's share of a strict budget (what is left, and what it admitted lately)"
    held = GaugeMetricFamily("gpu_admission_quota_share", text, labels=labels)
    for (policy, scope), usage in escrow.holdings().items():
        amounts: list[tuple[str, float]] = [
            ("gpuEquivalents", float(usage.gpu_equivalents)),
            ("gpus", float(usage.gpus)),
            ("pods", float(usage.pods)),
        ]
        amounts += [(f"slices {profile}", float(count)) for profile, count in usage.slices.items()]
        for name, amount in amounts:
            held.add_metric([policy, scope or "(policy-wide)", name], amount)
    yield held
    for name, value, about in (
        ("refills", escrow.refills, "Shares granted to this replica through the Lease"),
        ("refills_ahead", escrow.ahead, "Of the refills, those made before the share ran out (not by an admission)"),
        ("returns", escrow.returns, "Idle shares this replica gave back"),
        ("fallbacks", escrow.fallbacks, "Admissions judged by the per-pod compare-and-swap near the limit"),
    ):
        counter = CounterMetricFamily(f"gpu_admission_quota_share_{name}", about)
        counter.add_metric([], float(value))
        yield counter
