"""The background audit at scale, and what it costs admission.

1. How long the audit judges 100,000 GPU pods (rules, per-pod caps, budgets, servable requests
   against 500 nodes), in the audit process as the leader runs it (`gpu-admission audit`, here
   from a cluster-state file so no API server is needed).
2. Admission latency (the engine's mutate and validate of a GPU pod, as /mutate and /validate
   run them, in this process) p50 and p99, side by side: alone, and while the audit of those
   100,000 pods runs in its own process at the lower priority the leader gives it (nice 10), and,
   for comparison, while the same audit runs as a thread of this process (what the design avoids).

    python bench/audit.py [--pods 100000] [--admissions 4000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policies.audit.judging import audit_pods  # noqa: E402
from policies.engine import Engine  # noqa: E402
from policies.gpu.capacity import node_gpus  # noqa: E402
from policies.judge.quota import NoUsage  # noqa: E402
from policies.model.loader import load_texts  # noqa: E402
from policies.model.policyset import PolicySet  # noqa: E402
from policies.review.cluster import KnownCluster  # noqa: E402

POLICY = (ROOT / "examples/policies/training-quota.yaml").read_text().replace("team-a, team-a-*", "ns-*")
PROFILES = ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb", "nvidia.com/gpu")


def pods(count: int) -> list[dict[str, Any]]:
    made = []
    for i in range(count):
        resource = PROFILES[i % len(PROFILES)]
        labels = {"team": "a"} if i % 10 else {}
        made.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": f"ns-{i % 200}", "uid": f"u{i}", "labels": labels},
                "spec": {
                    "nodeName": f"n{i % 500}",
                    "containers": [{"name": "m", "image": "x", "resources": {"limits": {resource: "1"}}}],
                },
                "status": {"phase": "Running"},
            }
        )
    return made


def nodes() -> list[dict[str, Any]]:
    allocatable = {"nvidia.com/mig-1g.10gb": "3", "nvidia.com/mig-2g.20gb": "1", "nvidia.com/mig-3g.40gb": "1"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
            "status": {"allocatable": allocatable if i % 5 else {"nvidia.com/gpu": "8"}},
        }
        for i in range(500)
    ]


def engine() -> Engine:
    return Engine(PolicySet(load_texts([("p.yaml", POLICY)]).policies))


def admissions(count: int) -> list[float]:
    judge = engine()
    pod = pods(1)[0]
    took = []
    for _ in range(count):
        start = time.perf_counter()
        mutated = judge.mutate(pod).object
        judge.validate(mutated, NoUsage())
        took.append(time.perf_counter() - start)
    return took


def percentiles(samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=100)
    return f"p50 {q[49] * 1e6:7.1f} µs   p99 {q[98] * 1e6:7.1f} µs"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--admissions", type=int, default=4000)
    args = parser.parse_args()
    made, made_nodes = pods(args.pods), nodes()
    by_name = {n.name: n for n in (node_gpus(raw) for raw in made_nodes)}
    start = time.perf_counter()
    report = audit_pods(engine(), made, KnownCluster({f"ns-{i}": {} for i in range(200)}), by_name)
    took = time.perf_counter() - start
    print(
        f"audit of {args.pods} pods in this process: {took:.1f} s ({args.pods / took:,.0f} pods/s), "
        f"{len(report.findings)} findings"
    )
    with tempfile.TemporaryDirectory() as directory:
        state = Path(directory) / "cluster.json"
        state.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": made + made_nodes}))
        policies = Path(directory) / "p.yaml"
        policies.write_text(POLICY)
        alone = admissions(args.admissions)
        command = [
            sys.executable,
            "-m",
            "webhook.cli",
            "audit",
            "--cluster-state",
            str(state),
            "--policies",
            str(policies),
            "-o",
            "summary",
        ]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=lambda: os.nice(10), cwd=ROOT)
        time.sleep(3)  # past the child's start-up and file reading: into its judging
        beside_process = admissions(args.admissions)
        running = child.poll() is None
        out, _ = child.communicate()
        thread = threading.Thread(
            target=lambda: audit_pods(engine(), made, KnownCluster({f"ns-{i}": {} for i in range(200)}), by_name)
        )
        thread.start()
        beside_thread = admissions(args.admissions)
        thread.join()
    summary = json.loads(out.strip().splitlines()[-1])
    print(
        f"audit process: {summary['judged']} pods judged in {summary['seconds']:.1f} s "
        f"(still judging during the measurement: {running})"
    )
    print(f"admission alone:                       {percentiles(alone)}")
    print(f"admission beside the audit process:    {percentiles(beside_process)}")
    print(f"admission beside an in-process audit:  {percentiles(beside_thread)}")
    ratio = statistics.quantiles(beside_process, n=100)[98] / statistics.quantiles(alone, n=100)[98]
    ratio_thread = statistics.quantiles(beside_thread, n=100)[98] / statistics.quantiles(alone, n=100)[98]
    print(f"p99 ratio, beside the process / alone: {ratio:.2f}; beside a thread / alone: {ratio_thread:.2f}")


if __name__ == "__main__":
    main()
