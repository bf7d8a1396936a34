"""What gpu-admission costs pods with no GPU, by CPU, in rounds taken in turn on one plane.

Pods with no GPU never reach the webhook (its matchConditions keep them away), yet the API server
evaluates those conditions for each, and the replica's pod watch reads each. Their pods/s through
bench/control_plane.py move by a third between like runs on this machine, so a 5% effect cannot
be read from them. This script starts the e2e control plane with gpu-admission installed (one
replica, shipped settings) and creates pods with no GPU in rounds, the webhook configurations
changed between them in turn (`--rounds` of each arm):

- `none`: no configuration; `both`: gpu-admission's two pod webhooks as installed;
- `--arms` may add `mutating` (the mutating one alone: what one webhook for pods would cost) and
  `floor` (both with each condition `false`: what any webhook that scopes pods by a condition
  costs before reading anything).

Each round prints pods/s by 16 threads, the CPU ms a pod of the plane itself (kube-apiserver,
etcd, scheduler, controller-manager; not this script's client threads), of the API server alone
and of the replica (its watches read every pod in every arm); then, pods created one at a time,
the API server's own account (its /metrics) of µs a pod in admission (the mutating and validating
steps, every CREATE of the round) and in matchConditions. The CPU figures move by 0.3 ms between
like rounds here; the API server's account of admission, read one pod at a time, by a few µs.

The last lines put each arm beside `none`: what its configurations add, and the pods/s ratio a
machine bound by CPU would show (the plane's CPU a pod without them over the plane's with them
and the replica's).

    PYTHONPATH=. python bench/plain_pods.py [--pods 600] [--rounds 4] [--arms none,both] [--compiled]
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from control_plane import (  # the script's own folder
    SHIPPED,
    admission_seconds,
    create_pods,
    in_turn,
    medians,
    process_cpu,
    started,
    tree_cpu,
)

from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.harness import install
from tests.e2e.install import Replica
from tests.e2e.kubectl import Kubectl
from tools.compile_engine import ROOT, build

CONFIGURATIONS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")


def plane_cpu(plane: ControlPlane) -> dict[str, float]:
    """CPU seconds so far of each of the plane's processes, by name."""
    return {p.name: process_cpu(p.popen.pid) for p in plane.processes if p.popen is not None}


def configurations(kubectl: Kubectl) -> list[dict[str, Any]]:
    """gpu-admission's two webhook configurations as installed (caBundle set), to apply again."""
    items = []
    for kind in CONFIGURATIONS:
        found: dict[str, Any] = kubectl.get(kind, "gpu-admission")
        metadata = found["metadata"]
        found["metadata"] = {"name": metadata["name"], "labels": metadata.get("labels", {})}
        items.append(found)
    return items


ARMS = ("none", "floor", "mutating", "both")  # arm_configurations' keys


def arm_configurations(installed: list[dict[str, Any]]) -> dict[str, str | None]:
    """Each arm's configurations, as a List to apply (none: nothing)."""
    floor = json.loads(json.dumps(installed))
    for configuration in floor:
        for hook in configuration["webhooks"]:
            if any("pods" in rule["resources"] for rule in hook["rules"]):
                hook["matchConditions"] = [{"name": "never", "expression": "false"}]
    mutating = [c for c in installed if c["kind"] == "MutatingWebhookConfiguration"]

    def listed(items: list[dict[str, Any]]) -> str:
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})

    return {"none": None, "floor": listed(floor), "mutating": listed(mutating), "both": listed(installed)}


def round_of(plane: ControlPlane, api: Any, pods: int, replica: int, name: str) -> dict[str, float]:
    """One round: pods/s, CPU ms a pod of the plane, the API server and the replica; then, pods
    made one at a time, µs a pod of admission and of matchConditions by the API server's account."""
    plane_before, replica_before = plane_cpu(plane), tree_cpu(replica)
    rate = create_pods(api, "bench-plain", pods, 16, f"{name}-", gpus=False)
    plane_after, replica_after = plane_cpu(plane), tree_cpu(replica)
    spent = {n: (plane_after[n] - plane_before[n]) * 1000 / pods for n in plane_after}
    single = pods // 4
    steps_before = admission_seconds(plane)
    create_pods(api, "bench-plain", single, 1, f"{name}-single-", gpus=False)
    steps = {k: (v - steps_before[k]) * 1e6 / single for k, v in admission_seconds(plane).items()}
    return {
        "rate": rate,
        "plane": sum(spent.values()),
        "apiserver": spent["kube-apiserver"],
        "replica": (replica_after - replica_before) * 1000 / pods,
        "admission": steps["admission"],
        "conditions": steps["conditions"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each arm, taken in turn")
    parser.add_argument("--arms", default="none,both", help=f"of {', '.join(ARMS)}; none always")
    parser.add_argument("--compiled", action="store_true", help="the replica runs the compiled engine, as the image")
    args = parser.parse_args()
    arms = ["none", *(a for a in args.arms.split(",") if a != "none")]
    if unknown := [a for a in arms if a not in ARMS]:
        parser.error(f"no arm {', '.join(unknown)}: the arms are {', '.join(ARMS)}")  # before a plane starts
    with started() as (plane, kubectl, api, workdir):
        kubectl.run("create", "namespace", "bench-plain")
        installed = install(kubectl, plane, workdir / "gpu-admission")
        settings = SHIPPED | ({"PYTHONPATH": os.pathsep.join([str(build()), str(ROOT)])} if args.compiled else {})
        replica = installed.replica("gpu-admission-0", None, **settings)
        try:
            measure_rounds(plane, kubectl, api, replica, arms, args.rounds, args.pods)
        finally:
            replica.stop()  # the plane's own processes stop with it; the replica is this script's


HEADER = (
    f"{'arm':<10} {'pods/s':>8} {'plane ms':>9} {'API server ms':>14} {'replica ms':>11}"
    f" {'admission µs':>13} {'conditions µs':>14}"
)


def row_text(kind: str, row: dict[str, float]) -> str:
    """A round's (or the medians') line under HEADER."""
    return (
        f"{kind:<10} {row['rate']:8.1f} {row['plane']:9.2f} {row['apiserver']:14.2f} {row['replica']:11.2f}"
        f" {row['admission']:13.1f} {row['conditions']:14.1f}"
    )


def measure_rounds(
    plane: ControlPlane, kubectl: Kubectl, api: Any, replica: Replica, arms: list[str], rounds: int, pods: int
) -> None:
    """The rounds, the arms taken in turn, and what they come to."""
    replica.wait_ready()
    assert replica.process is not None
    applied = arm_configurations(configurations(kubectl))
    create_pods(api, "bench-plain", 200, 16, "warm", gpus=False)  # caches and connections, once
    rows: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    print(HEADER)
    for index, arm in in_turn(arms, rounds):
        kubectl.run("delete", *(f"{k}/gpu-admission" for k in CONFIGURATIONS), "--ignore-not-found")
        if (configured := applied[arm]) is not None:
            kubectl.apply(configured)
        create_pods(api, "bench-plain", 50, 16, f"settle{index}-", gpus=False)  # the switch taken up
        row = round_of(plane, api, pods, replica.process.pid, f"r{index}")
        rows[arm].append(row)
        print(row_text(arm, row))
    median = medians(rows)
    print("medians:")
    for arm, row in median.items():
        print(row_text(arm, row))
    none = median["none"]
    for arm in arms[1:]:
        row = median[arm]
        print(
            f"{arm}: the plane +{row['plane'] - none['plane']:.2f} ms a pod (the API server"
            f" +{row['apiserver'] - none['apiserver']:.2f}), admission +{row['admission'] - none['admission']:.1f} µs"
            f" ({row['conditions']:.1f} of it conditions);"
            f" by CPU {none['plane'] / (row['plane'] + row['replica']):.2f}x"
            f" of no admission, the API server's alone {none['apiserver'] / row['apiserver']:.2f}x"
            f" (pods/s, replica running in both: {row['rate'] / none['rate']:.2f}x)"
        )


if __name__ == "__main__":
    main()
