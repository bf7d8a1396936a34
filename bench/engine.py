"""µs per pod for the engine alone: decode the pod's JSON, parse, decide, mutate and record the
RFC 6902 patch.

A pod of 3 containers (2 GPU, 1 plain) against 10 matching policies, then the same pod against
sets of 10, 100 and 1,000 policies of which 10 match; last, a pod whose GPU count has an absurd
exponent, refused without building the number; and a pod holding its GPU through a DRA claim
template, beside the bench pod's validate. Figures are medians of several rounds,
measured side by side in one run; compare them as ratios. The first line times a fixed piece of
plain Python (`sum(range(1000))`) in the same run: the speed of this machine at that moment, so
figures taken on different days (or machines) can be compared as multiples of it.

With `--instructions`, instructions per pod instead (callgrind, steady where seconds are not), for
this tree, as source and compiled by mypyc (as the image ships it: tools/compile_engine.py),
beside an earlier commit (`--baseline`, the previous release by default): mutate and
validate under the 10 matching policies, and validate with 990 more that do not match the pod,
excluded by their namespaces, by a podSelector, or each by a CEL match condition of its own (over
a label, or over the pod's name).

    python bench/engine.py [--rounds 7] [--pods 2000]
    python bench/engine.py --instructions [--baseline 8203c60]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import timeit

import callgrind  # bench/callgrind.py: the script's own folder is on the path
import orjson

from policies.engine import Engine
from policies.errors import InputError
from policies.gpu.claims import claim_demand
from policies.judge.ledger import Ledger
from policies.model.loader import load_texts
from policies.model.policyset import PolicySet
from policies.review.cluster import KnownCluster

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


EXCLUDED_BY = ("namespace", "podSelector", "condition", "condition on the name")


def excluded(i: int, by: str) -> str:
    """A policy with a budget that the bench pod does not match, left out by `by`: its namespaces,
    a podSelector, or a CEL match condition of its own."""
    match = {
        "namespace": f'namespaces: ["other-{i}", "x{i}-*"]',
        "podSelector": f'namespaces: ["team-a"], podSelector: {{matchLabels: {{team: x{i}}}}}',
        "condition": f"namespaces: [\"team-a\"], condition: \"object.metadata.labels['team'] == 'x{i}'\"",
        "condition on the name": f'namespaces: ["team-a"], condition: "object.metadata.name == \'x{i}\'"',
    }[by]
    return f"""
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {{name: x{i:04d}}}
spec:
  match: {{{match}}}
  quota: {{limits: {{gpuEquivalents: "4"}}}}
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


# A pod that holds its GPU through a DRA claim template whose request is a firstAvailable ladder
# of two MIG profiles: charged, and held to the policy's mig section and guardrails.
LADDER = {
    "devices": {
        "requests": [
            {
                "name": "gpu",
                "firstAvailable": [
                    {
                        "name": profile,
                        "deviceClassName": "mig.nvidia.com",
                        "selectors": [
                            {"cel": {"expression": f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"}}
                        ],
                    }
                    for profile in ("1g.10gb", "2g.20gb")
                ],
            }
        ]
    }
}
CLAIM_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "claims-7d9f", "namespace": "team-a", "labels": {"team": "a"}},
    "spec": {
        "containers": [{"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "ladder"}],
    },
}


def claim_us(subject: Engine, pods: int) -> float:
    cluster = KnownCluster(claims={("team-a", True, "ladder"): claim_demand(LADDER)}, knows_claims=True)
    assert subject.validate(CLAIM_POD, Ledger(), cluster=cluster).usage.gpu_equivalents
    start = time.perf_counter()
    for _ in range(pods):
        subject.validate(CLAIM_POD, Ledger(), cluster=cluster)
    return (time.perf_counter() - start) / pods * 1e6


PREVIOUS_RELEASE = "8203c60"  # the commit the figures are compared with unless told otherwise


def instructions(baseline: str) -> None:
    matching = [(f"p{i}.yaml", policy(i, True)) for i in range(10)]
    cases: list[tuple[str, str, list[tuple[str, str]], int]] = [
        ("mutate, 10 matching policies", "mutate", matching, 200),
        ("validate, 10 matching policies", "validate", matching, 200),
    ]
    for by in EXCLUDED_BY:
        more = [(f"x{i}.yaml", excluded(i, by)) for i in range(10, 1000)]
        cases.append((f"validate, + 990 excluded by {by}", "validate", matching + more, 20))
    trees = [callgrind.tree(baseline), callgrind.tree(""), callgrind.compiled_tree()]
    print(f"instructions per pod (callgrind), side by side: {baseline} | this tree | this tree compiled (mypyc)")
    first: dict[str, float] = {}
    totals = [0.0, 0.0, 0.0]
    for label, what, texts, calls in cases:
        counts = [callgrind.per_call(source, what, texts, POD, calls) for source in trees]
        if texts is matching:
            totals = [t + c for t, c in zip(totals, counts, strict=True)]
        first.setdefault(what, counts[2])
        versus = "" if texts is matching else f"  (compiled: {counts[2] / first[what]:.2f}x the 10-policy validate)"
        print(
            f"  {label:<40} {counts[0] / 1e6:7.3f} M | {counts[1] / 1e6:7.3f} M ({counts[1] / counts[0]:.2f}x)"
            f" | {counts[2] / 1e6:7.3f} M ({counts[2] / counts[0]:.2f}x){versus}"
        )
    base, source, compiled = (t / 1e6 for t in totals)
    label = "mutate + validate"
    print(
        f"  {label:<40} {base:7.3f} M | {source:7.3f} M ({source / base:.2f}x)"
        f" | {compiled:7.3f} M ({compiled / base:.2f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--instructions", action="store_true", help="instructions per pod (callgrind) instead of µs")
    parser.add_argument("--baseline", default=PREVIOUS_RELEASE, help="the commit to compare with (--instructions)")
    args = parser.parse_args()
    if args.instructions:
        instructions(args.baseline)
        return
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
    claims = statistics.median(claim_us(subjects[10], args.pods) for _ in range(args.rounds))
    plain = statistics.median(validate_us(subjects[10], args.pods) for _ in range(args.rounds))
    print(
        f"engine validate, a pod naming a DRA claim template (firstAvailable of two profiles), 10 policies: "
        f"{claims:.1f} µs/pod, {claims / plain:.2f}x the bench pod's validate in the same run"
    )
    refused = statistics.median(refusal_us(subjects[10], args.pods) for _ in range(args.rounds))
    print(f"engine refusing nvidia.com/gpu: 1e600000 (a 4xx naming the field): {refused:.1f} µs/pod")


if __name__ == "__main__":
    main()
