"""The load one replica puts on the API server, counted from the API server's side.

Starts the test suite's in-process API server (tests/support/kube_fake.py) holding a cluster (pods on GPU
nodes, namespaces, a policy ConfigMap), then one replica as the Deployment runs it (the
container's gunicorn command), and counts from the API server's request log:
  - watch streams open at steady state, and requests per minute (by verb) over `--seconds`;
  - what a policy change costs: requests and pod list pages in the `--after` seconds following a
    new limit in the policy ConfigMap (steady-state requests of that window subtracted).
`--tree DIR` runs another checkout's code (e.g. a worktree of an older commit) against the same
cluster, `--workers N` asks for N gunicorn workers (GPU_ADMISSION_WORKERS and GUNICORN_CMD_ARGS,
whichever the tree reads), so designs can be put side by side in one run:

    python bench/api_load.py --tree /tmp/old --workers 1 --workers 4 --tree . --workers 1 --workers 4
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from certs.cert_files import ensure_dev_certificates  # noqa: E402
from tests.support.kube_fake import FakeKube  # noqa: E402

NS = "gpu-admission"
POLICY = """apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: team-quota}
spec:
  match: {namespaces: ["team-*"]}
  quota: {limits: {pods: %d}}
"""


def cluster(pods: int) -> FakeKube:
    kube = FakeKube()
    kube.start()
    kube.put(NS, "policies", {"q.yaml": POLICY % 100000})
    for i in range(20):
        kube.store("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{i}"}})
    for i in range(50):
        labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
        status = {"allocatable": {"nvidia.com/mig-1g.10gb": "7"}}
        kube.store(
            "nodes",
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": labels}, "status": status},
        )
    for i in range(pods):
        container = {"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}
        metadata = {"name": f"p{i}", "namespace": f"team-{i % 20}", "uid": f"uid-{i}"}
        spec = {"nodeName": f"n{i % 50}", "containers": [container]}
        kube.put_pod(
            {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": "Running"}}
        )
    return kube


def run(kube: FakeKube, tree: Path, workers: int, seconds: float, after: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ensure_dev_certificates(work / "certs")
        (work / "metrics").mkdir()
        env = {
            **os.environ,
            "PYTHONPATH": str(tree),
            "KUBECONFIG": str(kube.kubeconfig(work / "kubeconfig")),
            "GPU_ADMISSION_BIND": "127.0.0.1:0",
            "GPU_ADMISSION_CERT": str(work / "certs" / "tls.crt"),
            "GPU_ADMISSION_KEY": str(work / "certs" / "tls.key"),
            "GPU_ADMISSION_WATCH_NAMESPACE": NS,
            "GPU_ADMISSION_WORKERS": str(workers),
            "GUNICORN_CMD_ARGS": f"--workers {workers}",
            "POD_NAME": "bench-replica",
            "PROMETHEUS_MULTIPROC_DIR": str(work / "metrics"),
        }
        env.pop("KUBERNETES_SERVICE_HOST", None)
        command = [sys.executable, "-m", "gunicorn", "-c", "python:webhook.serving.gunicorn_conf", "webhook.wsgi:app"]
        log = (work / "log").open("wb")
        server = subprocess.Popen(command, cwd=tree, env=env, stdout=log, stderr=log)
        try:
            expected = 5 * workers
            deadline = time.monotonic() + 60
            while sum(kube.open_watches.values()) < expected and time.monotonic() < deadline:
                if server.poll() is not None:
                    return {"refused": (work / "log").read_text().strip().splitlines()[-1][:160]}
                time.sleep(0.2)
            time.sleep(3)  # the first lists are done; steady state from here
            start = len(kube.requests)
            time.sleep(seconds)
            steady = Counter(r.verb for r in kube.requests[start:])
            streams = sum(kube.open_watches.values())
            per_minute = {verb: count * 60 / seconds for verb, count in steady.items()}
            start, pages = len(kube.requests), kube.pages
            kube.put(NS, "policies", {"q.yaml": POLICY % 99999})
            time.sleep(after)
            change = Counter(r.verb for r in kube.requests[start:])
            extra = {verb: count - per_minute.get(verb, 0) * after / 60 for verb, count in change.items()}
            lists = sum(1 for r in kube.requests[start:] if r.verb == "list" and r.resource == "pods")
            return {
                "streams": streams,
                "per_minute": per_minute,
                "change": extra,
                "pod_pages": kube.pages - pages,
                "pod_lists": lists,
            }
        finally:
            server.terminate()
            server.wait(30)
            log.close()


def report(label: str, figures: dict[str, Any]) -> None:
    if "refused" in figures:
        print(f"  {label:28} refused: {figures['refused']}")
        return
    rate, change = figures["per_minute"], figures["change"]
    steady = ", ".join(f"{verb} {n:.0f}" for verb, n in sorted(rate.items())) or "none"
    extra = ", ".join(f"{verb} {n:+.0f}" for verb, n in sorted(change.items()) if abs(n) >= 0.5) or "none"
    print(f"  {label:28} watch streams {figures['streams']}, {sum(rate.values()):.0f} requests/min ({steady})")
    print(f"  {'':28} policy change: {figures['pod_pages']} pod list pages; extra requests: {extra}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", action="append", type=Path, help="a checkout to run (repeatable, default: this one)")
    parser.add_argument("--workers", action="append", type=int, help="worker counts to ask for (repeatable)")
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--after", type=float, default=10.0)
    args = parser.parse_args()
    print(f"one replica against a cluster of {args.pods} GPU pods; steady state over {args.seconds:g} s")
    for tree in args.tree or [ROOT]:
        for count in args.workers or [1, 4]:
            kube = cluster(args.pods)  # afresh: no stream of an earlier run still open
            try:
                figures = run(kube, tree.resolve(), count, args.seconds, args.after)
            finally:
                kube.stop()
            report(f"{tree.resolve().name} x{count} worker(s)", figures)


if __name__ == "__main__":
    main()
