"""Strict quotas as the real API server measures them, side by side in one run.

Starts the e2e control plane (tests/e2e: kube-apiserver, etcd, scheduler and controller-manager
built from Go modules on the first run; real RBAC), installs gpu-admission and puts three
replicas behind its one webhook address (as tests/e2e/test_strict_quota.py does). GPU pods are
then created by 16 client threads under one budget of a million pods, so every denial is a false
one, three ways: `consistency: local`; `strict` with shares (as shipped); `strict` writing the
Lease for every pod (the replicas restarted with GPU_ADMISSION_STRICT_SHARES=0). For each: pods
a second, the API server's own latency for the validating webhook
(`apiserver_admission_webhook_admission_duration_seconds`: mean, p50, p99), writes to Leases a
pod (`apiserver_request_total`; the status and certificate Leases' renewals are in it too) and
pods refused.

    PYTHONPATH=. python bench/quota_control_plane.py [--pods 400]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import time
from pathlib import Path

from control_plane import SHIPPED, histograms, mean, metric_lines, quantile, started
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.balancer import Balancer
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.harness import install, pod, policy_configmap, replicas_behind_balancer, wait_rewritten
from tests.e2e.install import Replica

BUDGET = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {{name: bench-{name}}}
spec:
  match: {{namespaces: [q-{name}]}}
  quota: {{limits: {{pods: 1000000}}, consistency: {consistency}}}
"""
HOOK = "validate-pods.gpu-admission.io"
LATENCY = "apiserver_admission_webhook_admission_duration_seconds"


def lease_writes(plane: ControlPlane) -> float:
    return sum(
        value
        for _, labels, value in metric_lines(plane, "apiserver_request_total")
        if labels.get("resource") == "leases" and labels.get("verb") in ("PUT", "POST")
    )


def create_all(api: client.CoreV1Api, namespace: str, count: int, prefix: str) -> tuple[float, int]:
    """(pods a second by 16 threads, pods refused)."""

    def create(index: int) -> bool:
        body = json.loads(pod(f"{prefix}{index}", namespace, gpus="1", labels={"team": "a"}))
        try:
            api.create_namespaced_pod(namespace, body)
            return True
        except ApiException:
            return False

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        created = list(pool.map(create, range(count)))
    return count / (time.perf_counter() - started), created.count(False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=400)
    parser.add_argument("--json", help="also write the figures here (docs/figures/data/: tools/figures.py draws them)")
    args = parser.parse_args()
    running: list[Replica] = []
    balancer: Balancer | None = None
    with started() as (plane, kubectl, api, workdir):
        try:
            installation = install(kubectl, plane, workdir / "gpu-admission")
            for name, consistency in (("local", "local"), ("strict", "strict"), ("perpod", "strict")):
                kubectl.run("create", "namespace", f"q-{name}")
                kubectl.run("label", "namespace", f"q-{name}", "gpu-admission.io/mig=default")
                kubectl.apply(policy_configmap(f"bench-{name}", BUDGET.format(name=name, consistency=consistency)))
            for replica in installation.replicas:
                replica.stop()
            setups: tuple[tuple[str, str, dict[str, str]], ...] = (
                ("local", "local", {}),
                ("strict, shares (as shipped)", "strict", {}),
                ("strict, a Lease write a pod", "perpod", {"GPU_ADMISSION_STRICT_SHARES": "0"}),
            )
            rows = []
            for label, name, env in setups:
                if balancer is None or env:
                    for replica in running:
                        replica.stop()
                    if balancer is not None:
                        balancer.stop()
                    # As shipped (audit every 600 s, INFO, certificates every 30 s), not as the
                    # e2e suite runs a replica (every 5 s, DEBUG, 2 s).
                    running, balancer = replicas_behind_balancer(installation, None, **{**SHIPPED, **env})
                # The budgets were applied before the replicas started: ready, they hold them.
                wait_rewritten(kubectl, pod(f"probe-{name}", f"q-{name}", gpus=1), "the replicas answering")
                latency, writes = histograms(plane, LATENCY), lease_writes(plane)
                rate, refused = create_all(api, f"q-{name}", args.pods, "p")
                after = histograms(plane, LATENCY)
                hook = (latency.get(HOOK, {}), after.get(HOOK, {}))
                rows.append((label, rate, refused, (lease_writes(plane) - writes) / args.pods, hook))
            print(f"{args.pods} GPU pods by 16 threads through the API server, 3 replicas, one budget of a million:")
            for label, rate, refused, writes, (hook_before, hook_after) in rows:
                p50, p99 = (quantile(hook_before, hook_after, q) * 1000 for q in (0.5, 0.99))
                print(
                    f"  {label:30s} {rate:7.1f} pods/s   {HOOK} mean {mean(hook_before, hook_after) * 1000:6.2f} ms"
                    f"  p50 {p50:6.2f}  p99 {p99:7.2f}   Lease writes/pod {writes:4.2f}   refused {refused}"
                )
            if args.json:
                figures = {
                    label: {
                        "pods_per_s": rate,
                        "p50": quantile(hook_before, hook_after, 0.5) * 1000,
                        "p99": quantile(hook_before, hook_after, 0.99) * 1000,
                        "lease_writes_a_pod": writes,
                        "refused": refused,
                    }
                    for label, rate, refused, writes, (hook_before, hook_after) in rows
                }
                written = {"bench": "bench/quota_control_plane.py", "pods": args.pods, "setups": figures}
                Path(args.json).write_text(json.dumps(written, indent=2) + "\n")
        finally:
            for replica in running:
                replica.stop()
            if balancer is not None:
                balancer.stop()


if __name__ == "__main__":
    main()
