"""Admission as the real API server measures it, side by side in one run.

Starts the e2e control plane (tests/e2e: built from Go modules on the first run), then:

1. pods created per second through the API server (16 client threads, GPU pods in a namespace
   labelled gpu-admission.io/mig=default, so our webhook rewrites them) before gpu-admission is
   installed and after;
2. the API server's own admission latency (`apiserver_admission_webhook_admission_duration_seconds`
   from its /metrics, p50/p99 from the histogram) for our mutating and validating webhooks, and
   `apiserver_validating_admission_policy_check_duration_seconds` for the same team-label rule as a
   ValidatingAdmissionPolicy, over the same pods.

    python bench/control_plane.py [--pods 400]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from kubernetes import client, config

from tests.e2e.controlplane.build import ensure_binaries
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.harness import install, pod, policy_configmap, register_nodes, wait_for
from tests.e2e.kubectl import Kubectl
from tests.e2e.test_neighbours import TEAM_LABEL_VAP

TEAM_RULE = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: bench-team-label}
spec:
  match: {namespaces: ["bench-*"]}
  rules:
    - name: require-team-label
      expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
      message: "GPU pods need a team label"
      action: deny
"""
SAMPLE = re.compile(r"^(?P<name>[a-z_]+)_bucket\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")


def histograms(plane: ControlPlane, metric: str) -> dict[str, dict[float, float]]:
    """Cumulative buckets of `metric` by the webhook or policy they are about."""
    _, body = plane.get("/metrics", timeout=30)
    found: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for line in body.decode().splitlines():
        match = SAMPLE.match(line)
        if not match or match["name"] != metric:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        who = labels.get("name") or labels.get("policy") or "?"
        if labels.get("operation", "CREATE") != "CREATE":
            continue
        bound = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        found[who][bound] += float(match["value"])
    return found


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The q-quantile (s) of what was observed between two readings, interpolated in its bucket."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1]
    if total <= 0:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(cumulative - below, 1e-9)
        lower, below = bound, cumulative
    return lower


def create_pods(api: client.CoreV1Api, namespace: str, count: int, labels: dict[str, str]) -> float:
    """Pods created per second by 16 threads; every create must succeed."""

    def create(index: int) -> None:
        api.create_namespaced_pod(namespace, json.loads(pod(f"p{index}", namespace, gpus="1", labels=labels)))

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(count)))
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=400)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="gpu-admission-bench-"))
    plane = ControlPlane(ensure_binaries(), workdir / "control-plane")
    plane.start()
    installed = None
    try:
        kubectl = Kubectl(plane.bin_dir / "kubectl", plane.kubeconfig)
        register_nodes(kubectl)
        configuration = client.Configuration()
        config.load_kube_config(str(plane.kubeconfig), client_configuration=configuration)
        configuration.connection_pool_maxsize = 32
        api = client.CoreV1Api(client.ApiClient(configuration))
        for namespace in ("bench-without", "bench-with", "vap-side"):
            kubectl.run("create", "namespace", namespace)
            kubectl.run("label", "namespace", namespace, "gpu-admission.io/mig=default")
        team = {"team": "a"}
        without = create_pods(api, "bench-without", args.pods, team)

        installed = install(kubectl, plane, workdir / "gpu-admission")
        kubectl.apply(policy_configmap("bench-team-label", TEAM_RULE))
        kubectl.apply(TEAM_LABEL_VAP)
        wait_for(
            lambda: kubectl.create(pod("probe", "bench-with", gpus=1), "--dry-run=server", check=False).code != 0,
            "the team rule loaded",
        )
        wait_for(
            lambda: kubectl.create(pod("probe", "vap-side", gpus=1), "--dry-run=server", check=False).code != 0,
            "the ValidatingAdmissionPolicy in force",
        )
        webhook_metric = "apiserver_admission_webhook_admission_duration_seconds"
        vap_metric = "apiserver_validating_admission_policy_check_duration_seconds"
        hooks_before = histograms(plane, webhook_metric)
        with_ours = create_pods(api, "bench-with", args.pods, team)
        hooks_after, vap_before = histograms(plane, webhook_metric), histograms(plane, vap_metric)
        create_pods(api, "vap-side", args.pods, team)
        vap_after = histograms(plane, vap_metric)

        print(f"pods created per second through the API server ({args.pods} GPU pods, 16 threads):")
        print(f"  without gpu-admission           {without:8.1f}")
        print(f"  with gpu-admission              {with_ours:8.1f}   ({with_ours / without:.2f}x)")
        print("admission latency as the API server measures it, same pods (ms):")
        rows = [
            (name, hooks_before, hooks_after)
            for name in sorted(hooks_after)
            if name.startswith(("mutate.", "validate-pods."))
        ]
        rows += [(f"VAP {name}", vap_before, vap_after) for name in sorted(vap_after)]
        for name, before, after in rows:
            key = name.removeprefix("VAP ")
            p50 = quantile(before.get(key, {}), after[key], 0.50) * 1000
            p99 = quantile(before.get(key, {}), after[key], 0.99) * 1000
            print(f"  {name:34s} p50 {p50:7.3f}   p99 {p99:7.3f}")
        if not vap_after:
            print(f"  (no {vap_metric} samples in /metrics)")
    finally:
        for replica in installed.replicas if installed else ():
            replica.stop()
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
