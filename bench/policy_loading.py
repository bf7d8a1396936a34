"""What checking policies costs: loading 1,000 policies, and the validating webhook's review of one
ConfigMap holding 300 (kubectl apply of a policy ConfigMap is linted inside the admission request,
so pod reviews wait behind it). Both with libyaml's parser (as shipped) and the pure-Python one,
side by side in one run; medians of several rounds.

With `--instructions`, the instructions loading 1,000 policies costs (callgrind), for this tree
(as source and compiled by mypyc, as the image ships it) beside an earlier commit (`--baseline`,
the previous release by default).

    python bench/policy_loading.py [--rounds 5]
    python bench/policy_loading.py --instructions [--baseline 8203c60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import callgrind  # noqa: E402
import engine as sample  # noqa: E402  (bench/engine.py's policies: CEL rule, quota, runtime each)

from policies.engine import Engine  # noqa: E402
from policies.model import yamldoc  # noqa: E402
from policies.model.loader import load_texts  # noqa: E402
from policies.model.policyset import PolicySet  # noqa: E402
from webhook.serving import admission  # noqa: E402
from webhook.serving.review import parse_review  # noqa: E402
from webhook.state import EngineHolder  # noqa: E402


def configmap_review(count: int) -> dict[str, object]:
    text = "\n---\n".join(sample.policy(i, False) for i in range(count))
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "gpu-admission", "labels": {"gpu-admission.io/policy": "true"}},
        "data": {"policies.yaml": text},
    }
    request = {
        "uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "operation": "CREATE",
        "namespace": "gpu-admission",
        "name": "big",
        "object": configmap,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="instructions (callgrind) instead of seconds")
    parser.add_argument("--baseline", default=sample.PREVIOUS_RELEASE, help="the commit to compare with")
    args = parser.parse_args()
    if args.instructions:
        texts = [(f"p{i}.yaml", sample.policy(i, i < 10)) for i in range(1000)]
        trees = [callgrind.tree(args.baseline), callgrind.tree(""), callgrind.compiled_tree()]
        counts = [callgrind.per_call(tree, "load", texts, calls=1) for tree in trees]
        print(f"load 1,000 policies (callgrind), side by side: {args.baseline} | this tree | compiled (mypyc)")
        print(
            f"  {counts[0] / 1e9:6.2f} G | {counts[1] / 1e9:6.2f} G ({counts[1] / counts[0]:.2f}x)"
            f" | {counts[2] / 1e9:6.2f} G ({counts[2] / counts[0]:.2f}x) instructions"
        )
        return
    texts = [(f"p{i}.yaml", sample.policy(i, i < 10)) for i in range(1000)]
    holder = EngineHolder()
    holder.swap(Engine(PolicySet(load_texts(texts[:10]).policies)))
    review = parse_review(configmap_review(300))
    assert not load_texts(texts).problems
    assert admission.validate(holder, review).allowed
    for name, loader in (
        ("libyaml (CSafeLoader, shipped)", yamldoc.FAST_LOADER),
        ("pure Python (SafeLoader)", yaml.SafeLoader),
    ):
        loads, reviews = [], []
        with mock.patch.object(yamldoc, "FAST_LOADER", loader):
            for _ in range(args.rounds):
                loads.append(seconds(lambda: load_texts(texts)))
                reviews.append(seconds(lambda: admission.validate(holder, review)))
        print(f"{name}:")
        print(f"  load 1,000 policies (1,000 files):      {statistics.median(loads):6.3f} s  (target under 1 s)")
        print(
            f"  review a 300-policy ConfigMap (/validate): {statistics.median(reviews) * 1000:6.0f} ms"
            " (target under 300 ms)"
        )


if __name__ == "__main__":
    main()
