"""Prometheus metrics, correct under several gunicorn workers (multiprocess mode when
PROMETHEUS_MULTIPROC_DIR is set before prometheus_client is first imported: `serve` sets it
first thing, the container image in its environment)."""

from __future__ import annotations

import functools
import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST
REVIEWS = Counter("gpu_admission_reviews_total", "Admission reviews answered", ["endpoint", "operation", "decision"])
LATENCY = Histogram(
    "gpu_admission_review_seconds",
    "Time to answer one review, body parsed to response built",
    ["endpoint"],
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
)
REJECTED = Counter("gpu_admission_rejected_requests_total", "Malformed requests answered 4xx", ["code"])
ENGINE_ERRORS = Counter("gpu_admission_engine_errors_total", "Reviews on which the engine failed", ["endpoint"])
GENERATION = Gauge("gpu_admission_policy_generation", "Generation of the policy set in force", multiprocess_mode="max")
POLICIES = Gauge("gpu_admission_policies", "Policies in the set in force", multiprocess_mode="max")
LOAD_ERRORS = Counter("gpu_admission_policy_load_errors_total", "Policy documents rejected at load")
RELISTS = Counter(
    "gpu_admission_watch_lists_total",
    "Full lists of a watched resource (first sync, 410 Gone, new policy set)",
    ["watch"],
)
TRACKED_PODS = Gauge("gpu_admission_tracked_pods", "GPU pods counted for quotas and capacity", multiprocess_mode="max")
WORKER_CONNECTIONS = Gauge(
    "gpu_admission_worker_connections",
    "Connections each gunicorn worker holds, kept-alive ones included (a series per worker slot and pid)",
    ["worker"],
    multiprocess_mode="liveall",
)
STRICT_CONFLICTS = Counter(
    "gpu_admission_strict_quota_conflicts_total",
    "Strict quota Lease writes refused because another replica wrote first",
)


# A labelled child looked up once: labels() validates and locks on every call, a few µs a review.
# Safe across fork: a multiprocess value notices a new pid and opens that process's own file.
@functools.cache
def reviews_counted(endpoint: str, operation: str, decision: str) -> Counter:
    return REVIEWS.labels(endpoint, operation, decision)


@functools.cache
def latency_of(endpoint: str) -> Histogram:
    return LATENCY.labels(endpoint)


@functools.cache
def connections_of(worker: int) -> Gauge:
    return WORKER_CONNECTIONS.labels(str(worker))


def exposition() -> bytes:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest()
