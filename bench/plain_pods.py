"""What gpu-admission costs pods with no GPU, by CPU, in rounds taken in turn on one plane.

Pods with no GPU never reach the webhook (its matchConditions keep them away), yet the API server
evaluates those conditions for each, and the replica's pod watch reads each. Their pods/s through
bench/control_plane.py move by a third between like runs on this machine, so a 5% effect cannot
be read from them. CPU a pod is steadier: this script starts the e2e control plane with
gpu-admission installed (one replica, shipped settings) and creates pods with no GPU by 16
threads in rounds, the webhook configurations deleted and applied again in turn (`--rounds` of
each), and prints per round and as medians:

- pods/s, and the CPU ms a pod of the plane itself (kube-apiserver, etcd, scheduler,
  controller-manager; not this script's client threads) and of the API server alone: with the
  configurations against without, what their conditions cost;
- the replica's CPU ms a pod (its watches read every pod in both kinds of round).

The last line puts them together: the plane's CPU a pod without gpu-admission over its CPU a pod
with it, the replica included, which is the pods/s ratio a machine bound by CPU would show.

    PYTHONPATH=. python bench/plain_pods.py [--pods 600] [--rounds 4] [--compiled]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from typing import Any

from control_plane import SHIPPED, create_pods, process_cpu, started, tree_cpu  # the script's own folder

from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.harness import install
from tests.e2e.install import Replica
from tests.e2e.kubectl import Kubectl
from tools.compile_engine import ROOT, build

CONFIGURATIONS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")


def plane_cpu(plane: ControlPlane) -> dict[str, float]:
    """CPU seconds so far of each of the plane's processes, by name."""
    return {p.name: process_cpu(p.popen.pid) for p in plane.processes if p.popen is not None}


def configurations(kubectl: Kubectl) -> str:
    """gpu-admission's two webhook configurations as installed (caBundle set), to apply again."""
    items = []
    for kind in CONFIGURATIONS:
        found: dict[str, Any] = kubectl.get(kind, "gpu-admission")
        metadata = found["metadata"]
        found["metadata"] = {"name": metadata["name"], "labels": metadata.get("labels", {})}
        items.append(found)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def round_of(plane: ControlPlane, api: Any, pods: int, replica: int, name: str) -> dict[str, float]:
    """One round: pods/s, and CPU ms a pod of the plane, the API server and the replica."""
    plane_before, replica_before = plane_cpu(plane), tree_cpu(replica)
    rate = create_pods(api, "bench-plain", pods, 16, f"{name}-", gpus=False)
    plane_after, replica_after = plane_cpu(plane), tree_cpu(replica)
    spent = {n: (plane_after[n] - plane_before[n]) * 1000 / pods for n in plane_after}
    return {
        "rate": rate,
        "plane": sum(spent.values()),
        "apiserver": spent["kube-apiserver"],
        "replica": (replica_after - replica_before) * 1000 / pods,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each, taken in turn")
    parser.add_argument("--compiled", action="store_true", help="the replica runs the compiled engine, as the image")
    args = parser.parse_args()
    with started() as (plane, kubectl, api, workdir):
        kubectl.run("create", "namespace", "bench-plain")
        installed = install(kubectl, plane, workdir / "gpu-admission")
        settings = SHIPPED | ({"PYTHONPATH": os.pathsep.join([str(build()), str(ROOT)])} if args.compiled else {})
        replica = installed.replica("gpu-admission-0", None, **settings)
        try:
            measure_rounds(plane, kubectl, api, replica, args.rounds, args.pods)
        finally:
            replica.stop()  # the plane's own processes stop with it; the replica is this script's


def row_text(kind: str, row: dict[str, float]) -> str:
    """A round's (or the medians') line under the table's header."""
    return f"{kind:<10} {row['rate']:8.1f} {row['plane']:9.2f} {row['apiserver']:14.2f} {row['replica']:11.2f}"


def measure_rounds(plane: ControlPlane, kubectl: Kubectl, api: Any, replica: Replica, rounds: int, pods: int) -> None:
    """The rounds, taken in turn, and what they come to."""
    replica.wait_ready()
    assert replica.process is not None
    applied = configurations(kubectl)
    create_pods(api, "bench-plain", 200, 16, "warm", gpus=False)  # caches and connections, once
    rows: dict[str, list[dict[str, float]]] = {"with": [], "without": []}
    print(f"{'round':<10} {'pods/s':>8} {'plane ms':>9} {'API server ms':>14} {'replica ms':>11}")
    for index in range(rounds * 2):
        # with, without, without, with, ...: neither kind always comes first after a switch
        kind = ("with", "without")[(index + index // 2) % 2]
        if kind == "with":
            kubectl.apply(applied)
        else:
            kubectl.run("delete", *(f"{k}/gpu-admission" for k in CONFIGURATIONS), "--ignore-not-found")
        create_pods(api, "bench-plain", 50, 16, f"settle{index}-", gpus=False)  # the switch taken up
        row = round_of(plane, api, pods, replica.process.pid, f"r{index}")
        rows[kind].append(row)
        print(row_text(kind, row))
    median = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in rows.items()}
    with_, without = median["with"], median["without"]
    print("medians:")
    for kind, row in median.items():
        print(row_text(kind, row))
    conditions = with_["plane"] - without["plane"]
    apiserver = with_["apiserver"] - without["apiserver"]
    replica_cost = statistics.median(r["replica"] for v in rows.values() for r in v)
    print(
        f"the configurations cost the plane {conditions:.2f} ms a pod (the API server {apiserver:.2f});"
        f" the replica {replica_cost:.2f} ms a pod"
    )
    print(
        f"by CPU, pods with no GPU run at {without['plane'] / (with_['plane'] + replica_cost):.2f}x of no admission"
        f" (pods/s, replica running in both: {with_['rate'] / without['rate']:.2f}x)"
    )


if __name__ == "__main__":
    main()
