"""Quota admission with many pods tracked: the cost of one admission with 100 and with 100,000
pods in the counters, and the memory the counters take.

Pods are fed to the server's own tracker (webhook.cluster.usage) as a relist would feed them:
200 namespaces, pods of 20 shapes (slices of several profiles, on 500 nodes), matched by a
namespace quota, a policy-wide quota and a rule. Admission is measured the way /validate runs it
(engine decision, check and reservation under the tracker's lock), on a pod that fits.
Memory is the growth of this process's RSS while the pods are counted (the pods themselves are
made one at a time and dropped, as pages of a list are).

    python bench/quota.py [--pods 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policies.engine import Engine  # noqa: E402
from policies.model.loader import load_texts  # noqa: E402
from policies.model.policyset import PolicySet  # noqa: E402
from policies.quantity import parse_quantity  # noqa: E402
from webhook.cluster.reservations import PodRef  # noqa: E402
from webhook.cluster.usage import PodUsageTracker  # noqa: E402

POLICIES = """
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: per-namespace}
spec:
  match: {namespaces: ["team-*"]}
  mig: {gpuModels: [A100-80GB, H100-80GB], defaultProfile: 1g.10gb}
  quota: {limits: {gpuEquivalents: "100000", pods: 100000}}
  rules:
    - {name: team, expression: "has(object.metadata.labels) && 'team' in object.metadata.labels", message: team}
---
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: cluster-wide}
spec:
  quota: {scope: policy, limits: {gpuEquivalents: "1000000", slices: {1g.10gb: 1000000}}}
"""
PROFILES = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "7g.80gb")


def pod(i: int) -> dict[str, Any]:
    shape = i % 20
    resources = {"limits": {f"nvidia.com/mig-{PROFILES[shape % len(PROFILES)]}": str(1 + shape // 10)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{i}",
            "namespace": f"team-{i % 200}",
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "labels": {"team": str(i % 200), "app": f"app-{shape}"},
        },
        "spec": {
            "nodeName": f"node-{i % 500}",
            "containers": [{"name": "main", "image": "cuda", "resources": resources}],
        },
        "status": {"phase": "Running"},
    }


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tracked(engine: Engine, count: int) -> tuple[PodUsageTracker, float, float]:
    """A tracker holding `count` pods; with the seconds and the RSS growth of counting them."""
    tracker = PodUsageTracker(lambda: engine.policy_set)
    gc.collect()
    before = rss_mib()
    start = time.perf_counter()
    tracker.replace_all(pod(i) for i in range(count))
    elapsed = time.perf_counter() - start
    gc.collect()
    return tracker, elapsed, rss_mib() - before


def admission_us(engine: Engine, tracker: PodUsageTracker, admissions: int) -> float:
    candidate = pod(10**9)
    candidate["metadata"]["namespace"] = "team-7"
    ref = PodRef("team-7", "candidate")
    start = time.perf_counter()
    for _ in range(admissions):
        decision = tracker.admit(lambda: engine.validate(candidate, tracker), ref, dry_run=True)
    elapsed = time.perf_counter() - start
    assert decision.allowed, decision.message
    return elapsed / admissions * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--admissions", type=int, default=2000)
    args = parser.parse_args()
    loaded = load_texts([("bench.yaml", POLICIES)], parse_quantity)
    assert not loaded.problems, loaded.problems
    engine = Engine(PolicySet(loaded.policies), parse_quantity)
    small, _, _ = tracked(engine, 100)
    large, relist_s, grown = tracked(engine, args.pods)
    assert large.tracked_pods == args.pods
    figures: dict[str, list[float]] = {"100": [], str(args.pods): []}
    for _ in range(args.rounds):
        figures["100"].append(admission_us(engine, small, args.admissions))
        figures[str(args.pods)].append(admission_us(engine, large, args.admissions))
    base = statistics.median(figures["100"])
    print("quota admission (decide, check, reserve under the lock), 2 quotas and a rule matching")
    for label, values in figures.items():
        median = statistics.median(values)
        print(
            f"  {label:>7} pods tracked: {median:7.1f} µs/admission (min {min(values):.1f})"
            f"  ratio to 100: {median / base:.2f}x"
        )
    print(f"counting {args.pods} pods (a relist): {relist_s:.2f} s, {relist_s / args.pods * 1e6:.1f} µs a pod")
    print(f"memory of the counters: RSS grew {grown:.1f} MiB ({grown * 2**20 / args.pods:.0f} bytes a pod)")


if __name__ == "__main__":
    main()
