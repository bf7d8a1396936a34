"""What reading DRA selectors as the scheduler does costs (issue #59): instructions per call
(callgrind), this tree beside an earlier commit (`--baseline`: the last one that read selectors by
regular expression), each as source and compiled by mypyc (as the image runs it), side by side.

- per pod: validate of a pod naming a ResourceClaimTemplate whose request is a `firstAvailable`
  ladder of two MIG profiles (bench/engine.py's claim pod), under 10 matching policies, with no
  device known and with the devices of 16 nodes shown (a DraInventory of 8 GPUs, 7 MIG devices of
  each, per node: 1,024 devices). The baseline has an inventory too (for consumable capacity) but
  never evaluates selectors over it;
- per claim: the first reading of a new set of selectors over those devices (compiled, its checked
  tree read, evaluated over each device), which the inventory then keeps until a slice changes; and
  the baseline's reading of the same texts (regular expressions).

    python bench/dra_reach.py [--baseline 935c801] [--calls 200]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import callgrind  # bench/callgrind.py: the script's own folder is on the path

BASELINE = "935c801"  # the last commit reading selectors by regular expression

CHILD = r"""
import collections, json, sys
from policies.engine import Engine
from policies.gpu.catalog import CATALOG
from policies.gpu.claims import claim_demand
from policies.gpu.dra_inventory import DraInventory, read_slice
from policies.judge.ledger import Ledger
from policies.model.loader import load_texts
from policies.model.policyset import PolicySet
from policies.review.cluster import KnownCluster

spec = json.load(open(sys.argv[1]))
calls = int(sys.argv[2])
inventory = None
if spec["slices"]:
    inventory = DraInventory()
    inventory.replace_slices({s["metadata"]["name"]: read_slice(s, CATALOG) for s in spec["slices"]})
demand = claim_demand(spec["claim"])
claims = {("team-a", True, "ladder"): demand}
try:  # this tree: `devices`; the baseline: `shares` (consumable capacity only)
    cluster = KnownCluster(claims=claims, knows_claims=True, devices=inventory) if inventory else None
except TypeError:
    cluster = KnownCluster(claims=claims, knows_claims=True, shares=inventory)
cluster = cluster or KnownCluster(claims=claims, knows_claims=True)
if spec["what"] == "validate":
    engine = Engine(PolicySet(load_texts([tuple(t) for t in spec["texts"]]).policies))
    assert engine.validate(spec["pod"], Ledger(), cluster=cluster).usage.gpu_equivalents
    call = lambda _: engine.validate(spec["pod"], Ledger(), cluster=cluster)
else:  # the first reading of new selector texts: each call its own (the texts differ by a literal)
    texts = [f"device.attributes['gpu.nvidia.com'].profile == '{i}g.x' && device.driver == 'gpu.nvidia.com'"
             for i in range(calls + 10)]
    try:
        from policies.gpu.device_cel import compile_selector
        def read(i):
            selector = compile_selector(texts[i])
            return inventory.reach((selector,)) if inventory is not None else selector.selection
    except ImportError:
        from policies.gpu.device_classes import read_expression
        read = lambda i: read_expression(texts[i])
    read(calls + 1)
    call = read
collections.deque(map(call, range(calls)), maxlen=0)  # the only part counted
"""


def policy(i: int) -> str:
    return f"""apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {{name: p{i}}}
spec:
  match: {{namespaces: [team-a]}}
  mig: {{allowedProfiles: [1g.10gb, 2g.20gb, 3g.40gb]}}
  quota: {{limits: {{gpuEquivalents: "{100 + i}"}}}}
"""


def slices(nodes: int = 16) -> list[dict[str, object]]:
    made: list[dict[str, object]] = []
    for n in range(nodes):
        devices = [
            {
                "name": f"gpu-{g}",
                "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"}},
            }
            for g in range(8)
        ]
        for g in range(8):
            for m in range(7):
                attributes = {
                    "type": {"string": "mig"},
                    "productName": {"string": "NVIDIA H100 80GB HBM3"},
                    "profile": {"string": "1g.10gb" if m < 4 else "2g.20gb"},
                }
                devices.append({"name": f"gpu-{g}-mig-{m}", "attributes": attributes})
        made.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"node-{n}"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": f"node-{n}",
                    "pool": {"name": f"node-{n}", "generation": 1},
                    "devices": devices,
                },
            }
        )
    return made


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    from engine import CLAIM_POD, LADDER  # bench/engine.py: the claim pod the other figures use

    texts = [(f"p{i}.yaml", policy(i)) for i in range(10)]
    base = callgrind.tree(args.baseline)
    trees: list[Path] = [base, callgrind.tree(""), callgrind.compiled_tree(base), callgrind.compiled_tree()]
    shown = slices()
    print(
        f"instructions per call (callgrind), side by side: {args.baseline} | this tree (ratio) | "
        f"{args.baseline} compiled | this tree compiled (ratio)"
    )
    cases = [
        ("validate, pod naming a claim, no device known", "validate", [], args.calls),
        ("validate, pod naming a claim, 1,024 devices shown", "validate", shown, args.calls),
        ("first reading of a selector, no device known", "read", [], 50),
        ("first reading of a selector over 1,024 devices", "read", shown, 20),
    ]
    for label, what, state, calls in cases:
        spec = {"what": what, "texts": texts, "pod": CLAIM_POD, "claim": LADDER, "slices": state}
        counts = [callgrind.counted(tree, CHILD, spec, calls) / 1e6 for tree in trees]
        print(
            f"  {label:<52} {counts[0]:7.3f} M | {counts[1]:7.3f} M ({counts[1] / counts[0]:.2f}x)"
            f" | {counts[2]:7.3f} M | {counts[3]:7.3f} M ({counts[3] / counts[2]:.2f}x)"
        )


if __name__ == "__main__":
    main()
