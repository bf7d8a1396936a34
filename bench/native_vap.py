"""A native policy against a hand-written ValidatingAdmissionPolicy of the same rule, in rounds
taken in turn on one plane, by pods/s and by the API server's own account.

#42's figure is "native policies within 1.1x of a hand-written VAP of the same rule". Through
bench/control_plane.py each is measured once, one after the other, and their pods/s move by a
tenth between like runs here. This script starts the e2e control plane and creates GPU pods in
one namespace with, in turn (`--rounds` of each arm):

- `none`: no policy;
- `hand`: the team-label rule as a hand-written VAP (tests/e2e/policies.py), bound to the
  namespace: every pod checked, nothing else read;
- `generated`: the same rule as a GPUPolicy, made by `gpu-admission native`: the webhook's scope
  (the pods that can reach a GPU) in its matchConditions, then the rule.

Each round prints pods/s by 16 threads, then, pods made one at a time, ms a pod and the API
server's own account of µs a pod in admission (bench/control_plane.py `admission_seconds`); the
last lines put `generated` beside `hand`.

    PYTHONPATH=. python bench/native_vap.py [--pods 400] [--rounds 4]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from control_plane import (  # the script's own folder
    NATIVE_RULE,
    admission_seconds,
    create_pods,
    in_turn,
    medians,
    started,
)

from policies import load_texts, native_policies
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.harness import pod, wait_refused
from tests.e2e.kubectl import Kubectl
from tests.e2e.policies import TEAM_LABEL_VAP
from webhook.cli.native import render

NAMESPACE = "bench-native"  # NATIVE_RULE's namespace
POLICY_KINDS = "validatingadmissionpolicy,validatingadmissionpolicybinding"


def arms() -> dict[str, str | None]:
    """Each arm's objects, as YAML to apply (none: nothing)."""
    made = native_policies(load_texts([("team.yaml", NATIVE_RULE)]).policies).only([NAMESPACE])
    return {"none": None, "hand": TEAM_LABEL_VAP.replace("vap-side", NAMESPACE), "generated": render(made.objects)}


def round_of(plane: ControlPlane, api: Any, pods: int, name: str) -> dict[str, float]:
    """pods/s by 16 threads; then, pods made one at a time, ms a pod and the API server's µs a
    pod in admission."""
    rate = create_pods(api, NAMESPACE, pods, 16, f"{name}c")
    single = pods // 2
    before, started_at = admission_seconds(plane), time.perf_counter()
    create_pods(api, NAMESPACE, single, 1, f"{name}s")
    elapsed, after = time.perf_counter() - started_at, admission_seconds(plane)
    admission = (after["admission"] - before["admission"]) * 1e6 / single
    return {"rate": rate, "ms": elapsed * 1000 / single, "admission": admission}


def row_text(arm: str, row: dict[str, float]) -> str:
    return f"{arm:<10} {row['rate']:8.1f} {row['ms']:10.2f} {row['admission']:13.1f}"


def measure_rounds(plane: ControlPlane, kubectl: Kubectl, api: Any, rounds: int, pods: int) -> None:
    applied = arms()
    create_pods(api, NAMESPACE, 100, 16, "warm")  # caches and connections, once
    rows: dict[str, list[dict[str, float]]] = {arm: [] for arm in applied}
    print(f"{'arm':<10} {'pods/s':>8} {'ms a pod':>10} {'admission µs':>13}")
    for index, arm in in_turn(list(applied), rounds):
        kubectl.run("delete", POLICY_KINDS, "--all")
        if (objects := applied[arm]) is not None:
            kubectl.apply(objects)
            wait_refused(kubectl, pod(f"probe{index}", NAMESPACE, gpus=1), f"the {arm} policy in force")
        create_pods(api, NAMESPACE, 30, 16, f"settle{index}-")  # the switch taken up
        rows[arm].append(round_of(plane, api, pods, f"r{index}"))
        print(row_text(arm, rows[arm][-1]))
    median = medians(rows)
    print("medians:")
    for arm, row in median.items():
        print(row_text(arm, row))
    none, hand, generated = median["none"], median["hand"], median["generated"]
    print(
        f"generated / hand: pods/s {generated['rate'] / hand['rate']:.2f}x, ms a pod one at a time"
        f" {generated['ms'] / hand['ms']:.2f}x; admission over none:"
        f" hand +{hand['admission'] - none['admission']:.1f} µs,"
        f" generated +{generated['admission'] - none['admission']:.1f} µs a pod"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each arm, taken in turn")
    args = parser.parse_args()
    with started() as (plane, kubectl, api, _):
        kubectl.run("create", "namespace", NAMESPACE)
        kubectl.run("label", "namespace", NAMESPACE, "gpu-admission.io/mig=default")
        measure_rounds(plane, kubectl, api, args.rounds, args.pods)


if __name__ == "__main__":
    main()
