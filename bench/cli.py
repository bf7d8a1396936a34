"""What `gpu-admission validate -f FILE` costs per pod offline (exit 1: the bundled default denies the
bench pod, whose gpu-memory and profile annotations disagree), in instructions (callgrind), for
this tree beside an earlier commit: the whole command over a file of 400 pods less the same over
100, per pod; and of that, what the engine's mutate + validate of one such pod costs under the
bundled default, so the rest is the command's own reading and printing.

    python bench/cli.py [--baseline 8203c60]
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from pathlib import Path
from typing import Any

import callgrind
import yaml
from engine import POD, PREVIOUS_RELEASE

ENGINE = r"""
import collections, inspect, sys, yaml
from policies.engine import Engine
from policies.judge.ledger import Ledger
from policies.quantity import parse_quantity
from webhook.sources.policy_files import load_policies
policy_set = load_policies(None)[0]
extra = (parse_quantity,) if "parse_quantity" in inspect.signature(Engine).parameters else ()
engine = Engine(policy_set, *extra)
pod = yaml.safe_load(open(sys.argv[1]))
engine.validate(engine.mutate(pod).object, Ledger())
call = lambda _: engine.validate(engine.mutate(pod).object, Ledger())
collections.deque(map(call, range(int(sys.argv[2]))), maxlen=0)
"""


def pods_file(folder: Path, count: int) -> Path:
    docs = []
    for i in range(count):
        pod: dict[str, Any] = copy.deepcopy(POD)
        pod["metadata"]["name"] = f"infer-{i}"
        docs.append(pod)
    path = folder / f"pods-{count}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default=PREVIOUS_RELEASE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        small, large = pods_file(Path(folder), 100), pods_file(Path(folder), 400)
        one = pods_file(Path(folder), 1)
        print(f"gpu-admission validate -f, per pod (callgrind), side by side: {args.baseline} | this tree")
        rows: list[list[float]] = []
        for ref in (args.baseline, ""):
            source = callgrind.tree(ref)
            command = [sys.executable, "-m", "webhook.cli", "validate", "-f"]
            counts = [callgrind.collected(source, [*command, str(path)], exits=(0, 1)) for path in (large, small)]
            whole = (counts[0] - counts[1]) / 300
            engine = callgrind.collected(source, [sys.executable, "-c", ENGINE, str(one), "100"], toggle=True) / 100
            rows.append([whole, engine, whole - engine])
        for i, label in enumerate(("the command", "the engine (mutate + validate)", "reading and printing")):
            before, now = rows[0][i], rows[1][i]
            print(f"  {label:<32} {before / 1e6:6.2f} M | {now / 1e6:6.2f} M  ({now / before:.2f}x)")


if __name__ == "__main__":
    main()
