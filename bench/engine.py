"""µs per pod for the engine alone: decode the pod's JSON, parse, decide, mutate and record the
RFC 6902 patch.

A pod of 3 containers (2 GPU, 1 plain) against 10 matching policies, then the same pod against
sets of 10, 100 and 1,000 policies of which 10 match; last, a pod whose GPU count has an absurd
exponent, refused without building the number. Figures are medians of several rounds,
measured side by side in one run; compare them as ratios. The first line times a fixed piece of
plain Python (`sum(range(1000))`) in the same run: the speed of this machine at that moment, so
figures taken on different days (or machines) can be compared as multiples of it.

    python bench/engine.py [--rounds 7] [--pods 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import timeit

import orjson

from policies.engine import Engine
from policies.errors import InputError
from policies.judge.ledger import Ledger
from policies.model.loader import load_texts
from policies.model.policyset import PolicySet

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "infer-7d9f",
        "namespace": "team-a",
        "labels": {"team": "a", "app": "infer"},
        "annotations": {"gpu-admission.io/gpu-memory": "15Gi", "gpu-admission.io/mig-profile.encoder": "1g.10gb"},
    },
    "spec": {
        "containers": [
            {"name": "encoder", "image": "enc:1", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}}},
            {"name": "decoder", "image": "dec:1", "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "8Gi"}}},
            {"name": "proxy", "image": "envoy:1", "resources": {"requests": {"cpu": "100m"}}},
        ],
        "tolerations": [{"key": "spot", "operator": "Exists"}],
    },
}


def policy(i: int, matching: bool) -> str:
    namespaces = '["team-a", "team-*"]' if matching else f'["other-{i}", "x{i}-*"]'
    return f"""
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {{name: p{i:04d}}}
spec:
  priority: {i % 7}
  match:
    namespaces: {namespaces}
    podSelector: {{matchLabels: {{team: a}}}}
  mig: {{gpuModels: [A100-80GB, H100-80GB], defaultProfile: 1g.10gb}}
  rules:
    - {{name: team, expression: "'team' in object.metadata.labels", message: needs a team, action: deny}}
  quota:
    limits: {{gpuEquivalents: "40", pods: 100}}
    perPod: {{gpuEquivalents: "2"}}
  runtime:
    runtimeClassName: nvidia
    tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
    env: {{NVIDIA_DRIVER_CAPABILITIES: "compute,utility", POLICY_{i}: "on"}}
    shmSize: 1Gi
"""


def engine(total: int, matching: int = 10) -> Engine:
    texts = [(f"p{i}.yaml", policy(i, i < matching)) for i in range(total)]
    result = load_texts(texts)
    assert not result.problems, result.problems[:3]
    return Engine(PolicySet(result.policies))


POD_JSON = orjson.dumps(POD)


def per_pod_us(subject: Engine, pods: int) -> float:
    start = time.perf_counter()
    for _ in range(pods):
        subject.mutate(orjson.loads(POD_JSON))
    return (time.perf_counter() - start) / pods * 1e6


def validate_us(subject: Engine, pods: int) -> float:
    mutated = subject.mutate(POD).object
    ledger = Ledger()
    start = time.perf_counter()
    for _ in range(pods):
        subject.validate(mutated, ledger)
    return (time.perf_counter() - start) / pods * 1e6


def refusal_us(subject: Engine, pods: int) -> float:
    """A review whose GPU count has an absurd exponent: refused from the exponent alone."""
    huge = orjson.loads(POD_JSON)
    huge["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1e600000"
    start = time.perf_counter()
    for _ in range(pods):
        with contextlib.suppress(InputError):
            subject.validate(huge, Ledger())
    return (time.perf_counter() - start) / pods * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pods", type=int, default=2000)
    args = parser.parse_args()
    subjects = {n: engine(n) for n in (10, 100, 1000)}
    assert subjects[10].mutate(POD).changes
    loop = min(timeit.repeat("sum(range(1000))", number=2000, repeat=7)) / 2000 * 1e6
    print(f"this machine now: sum(range(1000)) takes {loop:.1f} µs (figures below also as multiples of it)")
    for label, measure in (("mutate + patch", per_pod_us), ("validate (rules, quota, MIG check)", validate_us)):
        figures: dict[int, list[float]] = {n: [] for n in subjects}
        for _ in range(args.rounds):
            for n, subject in subjects.items():
                figures[n].append(measure(subject, args.pods))
        base = statistics.median(figures[10])
        print(f"engine {label}: pod with 3 containers, 10 matching policies")
        for n, values in figures.items():
            median = statistics.median(values)
            print(
                f"  {n:>5} policies: {median:8.1f} µs/pod (min {min(values):.1f}, {median / loop:.1f} loops)"
                f"  ratio to 10: {median / base:.2f}x"
            )
    refused = statistics.median(refusal_us(subjects[10], args.pods) for _ in range(args.rounds))
    print(f"engine refusing nvidia.com/gpu: 1e600000 (a 4xx naming the field): {refused:.1f} µs/pod")


if __name__ == "__main__":
    main()
