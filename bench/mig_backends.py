"""What each MIG back-end adds to a pod's admission (docs/mig-backends.md), side by side in one run.

The same pod (`nvidia.com/gpu: 1`, `gpu-memory: 15Gi`) under the same policy but for its
`mig.backend`: `devicePlugin` (the rewrite as before DRA), `draExtendedResource` (the same name,
no GFD pin) and `draClaim` (a claim from a ladder template). The cluster, as a replica sees it: a
device-plugin node, DRA slices and our DeviceClasses, and the ladder templates published.

Prints µs per pod for mutate and for validate (which charges the claim's worst rung), medians of
several rounds, each as a ratio to the device plugin's in the same run; with `--instructions`,
instructions per call (callgrind) for mutate and validate of this tree, source and compiled, with
no cluster state (the back-end named by the policy decides alone; the ladder's template is then
unknown to validate, which warns rather than charges it).

    PYTHONPATH=. python bench/mig_backends.py [--rounds 7] [--pods 2000] [--instructions]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import callgrind  # bench/callgrind.py: the script's own folder is on the path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policies.engine import Engine  # noqa: E402
from policies.gpu.capacity import (
    CapacityLedger,  # noqa: E402
    NodeGpus,
)
from policies.gpu.catalog import CATALOG  # noqa: E402
from policies.gpu.claims import claim_demand  # noqa: E402
from policies.judge.ledger import Ledger  # noqa: E402
from policies.model.loader import load_texts  # noqa: E402
from policies.model.policyset import PolicySet  # noqa: E402
from policies.planning.published import policy_ladders  # noqa: E402
from policies.review.cluster import KnownCluster  # noqa: E402
from tests.support.dra import GPU_CLASS, MIG_CLASS, dra_capacity, resource_slice, slice_device  # noqa: E402
from tools.mig_classes import device_classes  # noqa: E402

BACKENDS = ("devicePlugin", "draExtendedResource", "draClaim")
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "infer-7d9f", "namespace": "team-a", "annotations": {"gpu-admission.io/gpu-memory": "15Gi"}},
    "spec": {"containers": [{"name": "main", "image": "vllm:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
}


def policy(backend: str) -> str:
    return f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {{name: team-a}}
spec:
  match: {{namespaces: [team-a]}}
  mig: {{gpuModels: [H100-80GB], allowedProfiles: [1g.20gb, 2g.20gb, 3g.40gb], backend: {backend}}}
  runtime: {{tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]}}
  quota: {{limits: {{gpuEquivalents: "8"}}, perPod: {{gpuEquivalents: "1"}}}}
"""


def engine(backend: str) -> Engine:
    result = load_texts([("p.yaml", policy(backend))])
    assert not result.problems, result.problems
    return Engine(PolicySet(result.policies))


def cluster(subject: Engine) -> KnownCluster:
    """A device-plugin node and a DRA node of H100s, our classes, and the templates published."""
    ledger = CapacityLedger(CATALOG)
    mixed = {"nvidia.com/mig.strategy": "mixed"}
    ledger.set_node(NodeGpus("dp", "NVIDIA-H100-80GB-HBM3", {"nvidia.com/mig-1g.20gb": 4}, mixed))
    ledger.mark_synced()
    h100 = "NVIDIA H100 80GB HBM3"
    dra = resource_slice("dra", *(slice_device(f"mig-{i}", h100, "1g.20gb", "20096Mi") for i in range(4)))
    capacity, classes = dra_capacity(dra, classes=[GPU_CLASS, MIG_CLASS, *device_classes()], labels=ledger)
    ladders = policy_ladders(subject.policy_set.policies[0], CATALOG, capacity)
    templates = {
        ("team-a", True, n): claim_demand(lad.spec(CATALOG)["spec"], "spec.spec") for n, lad in ladders.items()
    }
    return KnownCluster(capacity=capacity, device_classes=classes, claims=templates, knows_claims=True)


def per_pod_us(subject: Engine, known: KnownCluster, pods: int, what: str) -> float:
    mutated = subject.mutate(POD, cluster=known).object
    start = time.perf_counter()
    for _ in range(pods):
        if what == "mutate":
            subject.mutate(POD, cluster=known)
        else:
            subject.validate(mutated, Ledger(), cluster=known)
    return (time.perf_counter() - start) / pods * 1e6


def instructions() -> None:
    trees = [callgrind.tree(""), callgrind.compiled_tree()]
    print("instructions per call (callgrind), no cluster state: this tree | compiled (mypyc)")
    first: dict[str, list[float]] = {}
    for backend in BACKENDS:
        for what in ("mutate", "validate"):
            counts = [callgrind.per_call(tree, what, [("p.yaml", policy(backend))], POD, 200) for tree in trees]
            base = first.setdefault(what, counts)
            print(
                f"  {what:<8} {backend:<20} {counts[0] / 1e6:6.3f} M ({counts[0] / base[0]:.2f}x)"
                f" | {counts[1] / 1e6:6.3f} M ({counts[1] / base[1]:.2f}x)"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--instructions", action="store_true")
    args = parser.parse_args()
    if args.instructions:
        instructions()
        return
    subjects = {b: engine(b) for b in BACKENDS}
    known = {b: cluster(s) for b, s in subjects.items()}
    for what in ("mutate", "validate"):
        figures: dict[str, list[float]] = {b: [] for b in BACKENDS}
        for _ in range(args.rounds):
            for backend in BACKENDS:
                figures[backend].append(per_pod_us(subjects[backend], known[backend], args.pods, what))
        base = statistics.median(figures[BACKENDS[0]])
        print(f"engine {what}, one pod, the cluster as a replica sees it (median of {args.rounds} rounds):")
        for backend, values in figures.items():
            median = statistics.median(values)
            print(f"  {backend:<20} {median:7.1f} µs/pod  {median / base:.2f}x the device plugin's")


if __name__ == "__main__":
    main()
