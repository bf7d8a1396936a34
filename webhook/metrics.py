"""Prometheus metrics, correct under several gunicorn workers (multiprocess mode when
PROMETHEUS_MULTIPROC_DIR is set before prometheus_client is first imported: `serve` sets it
first thing, the container image in its environment)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.registry import Collector

from webhook.environment import metrics_directory

CONTENT_TYPE = CONTENT_TYPE_LATEST
# dry_run: `kubectl apply --dry-run=server` and the like, told apart from what the cluster admits
# (Gatekeeper labels its metrics so too).
REVIEWS = Counter(
    "gpu_admission_reviews_total", "Admission reviews answered", ["endpoint", "operation", "decision", "dry_run"]
)
LATENCY = Histogram(
    "gpu_admission_review_seconds",
    "Time to answer one review, body parsed to response built",
    ["endpoint"],
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
)
REJECTED = Counter("gpu_admission_rejected_requests_total", "Malformed requests answered 4xx", ["code"])
ENGINE_ERRORS = Counter("gpu_admission_engine_errors_total", "Reviews on which the engine failed", ["endpoint"])
# Gauges of live processes only (livemax): a dead process's last values must not outlive it.
GENERATION = Gauge(
    "gpu_admission_policy_generation", "Generation of the policy set in force", multiprocess_mode="livemax"
)
POLICIES = Gauge("gpu_admission_policies", "Policies in the set in force", multiprocess_mode="livemax")
OUT_OF_FORCE = Gauge(
    "gpu_admission_policies_out_of_force",
    "Policy files that never loaded (here or persisted in the cluster): they fail closed",
    multiprocess_mode="livemax",
)
LOAD_ERRORS = Counter("gpu_admission_policy_load_errors_total", "Policy documents rejected at load")
RELISTS = Counter(
    "gpu_admission_watch_lists_total",
    "Full lists of a watched resource (first sync, 410 Gone, new policy set)",
    ["watch"],
)
HANDLER_ERRORS = Counter(
    "gpu_admission_watch_handler_errors_total",
    "Watched objects (or whole lists) a handler failed on: logged with their traceback",
    ["watch"],
)
TRACKED_PODS = Gauge(
    "gpu_admission_tracked_pods", "GPU pods counted for quotas and capacity", multiprocess_mode="livemax"
)
DUAL_ADVERTISED_NODES = Gauge(
    "gpu_admission_dual_advertised_nodes",
    "Nodes whose GPUs both the device plugin and NVIDIA's DRA driver advertise (either may hand out one the other did)",
    multiprocess_mode="livemax",
)
OPEN_CONNECTIONS = Gauge(
    "gpu_admission_open_connections",
    "Connections the worker holds open, kept-alive and waiting ones included",
    multiprocess_mode="livesum",
)
REFUSED_CONNECTIONS = Counter(
    "gpu_admission_refused_connections_total",
    "Connections reset at once: the worker held its cap of open connections and none was idle",
)
EVICTED_CONNECTIONS = Counter(
    "gpu_admission_evicted_connections_total",
    "Idle connections closed to make room for a new one at the cap",
)
CUT_REQUESTS = Counter(
    "gpu_admission_cut_requests_total", "Requests cut short past their read or answer deadline (slow clients)"
)
STRICT_CONFLICTS = Counter(
    "gpu_admission_strict_quota_conflicts_total",
    "Strict quota Lease writes refused because another replica wrote first",
)
AUDIT_VIOLATIONS = Gauge(
    "gpu_admission_audit_violations",
    "Findings of the last background audit (run by the leader), by policy and rule",
    ["policy", "rule"],
    multiprocess_mode="livemax",
)
AUDIT_RUNS = Counter("gpu_admission_audit_runs_total", "Background audits run by this replica", ["result"])
AUDIT_SECONDS = Gauge(
    "gpu_admission_audit_seconds",
    "How long the last background audit judged (its own process)",
    multiprocess_mode="livemax",
)
STRICT_OUT_OF_TIME = Counter(
    "gpu_admission_strict_quota_out_of_time_total",
    "Strict quota admissions denied because the Leases stayed contended for the whole time budget",
)


# A labelled child looked up once: labels() validates and locks on every call, a few µs a review.
# Safe across fork: a multiprocess value notices a new pid and opens that process's own file.
@functools.cache
def reviews_counted(endpoint: str, operation: str, decision: str, dry_run: bool = False) -> Counter:
    return REVIEWS.labels(endpoint, operation, decision, "true" if dry_run else "false")


@functools.cache
def latency_of(endpoint: str) -> Histogram:
    return LATENCY.labels(endpoint)


@dataclass(frozen=True)
class ConnectionMetrics:
    open: Gauge
    refused: Counter
    evicted: Counter
    cut: Counter


@functools.cache
def connection_metrics() -> ConnectionMetrics:
    """Looked up once a process (the worker's counts change on every connection)."""
    return ConnectionMetrics(OPEN_CONNECTIONS, REFUSED_CONNECTIONS, EVICTED_CONNECTIONS, CUT_REQUESTS)


def exposition(extra: Collector | None = None) -> bytes:
    """Every metric; `extra`: one computed at scrape time in this process (the replica's quota view)."""
    if metrics_directory():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        base = generate_latest(registry)
    else:
        base = generate_latest()
    if extra is None:
        return base
    own = CollectorRegistry()
    own.register(extra)
    return base + generate_latest(own)
