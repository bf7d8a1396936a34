"""Instructions a pod watch event costs the replica's counters (webhook.cluster.quota.counting),
for this tree and an earlier commit side by side (callgrind: steady where seconds are not).

Four events, each through `PodCounting.observe` under the bundled default policy, the pods'
JSON already decoded (the stream's reading and decoding are the same for both trees):
- a GPU pod's status report (the kubelet's: conditions changed, nothing the engine reads);
- the same pod changed in what it holds (its labels, alternately);
- and both for a pod with no GPU, which the watch sees as often.

    python bench/pod_watch.py [--baseline 309032d] [--calls 2000]
"""

from __future__ import annotations

import argparse
import copy
import json
from typing import Any

import callgrind  # bench/callgrind.py: the script's own folder is on the path

CHILD = r"""
import collections, json, sys
sys.path.append(sys.argv[3])
from webhook.cluster.quota.counting.pod_counting import PodCounting
from webhook.sources.policy_files import load_policies

spec = json.load(open(sys.argv[1]))
calls = int(sys.argv[2])
policy_set, _ = load_policies(None)
counting = PodCounting(lambda: policy_set)
counting.replace_all([])
events = spec["events"]
counting.observe("ADDED", events[0])
call = lambda i: counting.observe("MODIFIED", events[i % len(events)])
collections.deque(map(call, range(calls)), maxlen=0)  # the only part counted
"""

GPU_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "train-0",
        "namespace": "ml",
        "uid": "0b7c5e8e-4f7a-4d58-9d1c-3f0c2a6e1a11",
        "resourceVersion": "1",
        "labels": {"team": "a", "app": "train"},
        "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1"}],
    },
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"}},
                "env": [{"name": f"VAR_{i}", "value": "x"} for i in range(5)],
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io"}],
            }
        ],
        "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300}],
        "nodeName": "gpu-1",
    },
    "status": {"phase": "Running", "podIP": "10.0.0.7"},
}
PLAIN_POD = copy.deepcopy(GPU_POD)
PLAIN_POD["metadata"]["uid"] = "5d2f9a1c-0e3b-4c6a-8f7d-2b1e9c4a7d22"
PLAIN_POD["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}


def versions(pod: dict[str, Any], changed: bool) -> list[dict[str, Any]]:
    """Two versions of `pod` after its first: status reports, or alternately relabelled too."""
    made = []
    for i in range(2):
        version = json.loads(json.dumps(pod))
        version["metadata"]["resourceVersion"] = str(i + 2)
        version["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastProbeTime": str(i)}]
        if changed:
            version["metadata"]["labels"]["app"] = f"train-{i}"
        made.append(version)
    return [pod, *made]


EVENTS = {
    "a GPU pod's status report": versions(GPU_POD, changed=False),
    "a GPU pod, relabelled": versions(GPU_POD, changed=True),
    "a pod with no GPU, status report": versions(PLAIN_POD, changed=False),
    "a pod with no GPU, relabelled": versions(PLAIN_POD, changed=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="309032d", help="the commit to compare with")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    trees = {args.baseline: callgrind.tree(args.baseline), "this tree": callgrind.ROOT}
    print(f"instructions a pod watch event (callgrind, {args.calls} events each)")
    print(f"  {'':36s} " + " ".join(f"{name:>12s}" for name in trees) + "   ratio")
    for what, events in EVENTS.items():
        counts = [
            callgrind.counted(tree, CHILD, {"events": events}, args.calls, str(callgrind.ROOT))
            for tree in trees.values()
        ]
        row = " ".join(f"{count / 1e3:10.1f} K" for count in counts)
        print(f"  {what:36s} {row}   {counts[1] / counts[0]:.2f}x")


if __name__ == "__main__":
    main()
