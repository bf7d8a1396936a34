"""Load on the webhook as the API server gives it: gunicorn, TLS, keep-alive, realistic GPU pod reviews.

Starts the admission server and a bare Flask endpoint (fixed AdmissionReview) under the same
gunicorn settings and TLS, drives each from separate client processes over keep-alive
connections, and prints throughput, p50, p99 and RSS per worker, side by side in one run.
/mutate gets the pod as a user wrote it; /validate gets it as the API server sends it there,
already mutated. Subjects take turns over several rounds and the medians are printed, so a
passing disturbance on this shared machine moves one round, not the comparison.
`--also-worker gthread` adds the same subjects under another gunicorn worker class, side by side;
`--compiled` the webhook with its engine compiled by mypyc, as the image runs it.

    python bench/load.py [--seconds 6] [--rounds 3] [--clients 4] [--rate 300] [--also-worker gthread] [--compiled]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from wire import KeepAliveClient, serve_floor  # noqa: E402  (the script's own folder is on the path)

from certs.cert_files import generate  # noqa: E402
from tools.compile_engine import build  # noqa: E402


def pod(i: int) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "infer-",
            "namespace": "ml",
            "labels": {"team": "a", "app": "infer"},
            "annotations": {"gpu-admission.io/gpu-memory": "15Gi"},
        },
        "spec": {
            "containers": [
                {
                    "name": "model",
                    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"}},
                    "env": [{"name": "MODEL", "value": "llama"}],
                    "ports": [{"containerPort": 8080}],
                },
                {"name": "proxy", "image": "envoy:1.30", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
            ]
        },
    }


def review(i: int, obj: dict[str, object] | None = None) -> bytes:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{i}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "ml",
            "userInfo": {"username": "system:serviceaccount:ml:deployer"},
            "object": obj or pod(i),
        },
    }
    return json.dumps(body).encode()


def bodies(path: str) -> list[bytes]:
    """64 reviews; for /validate the pods as the mutating webhook (bundled policies) left them."""
    if path != "/validate":
        return [review(i) for i in range(64)]
    from policies.engine import Engine
    from webhook.sources.policy_files import load_policies

    engine = Engine(load_policies(None)[0])
    return [review(i, engine.mutate(pod(i)).object) for i in range(64)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    app: str, port: int, cert_dir: Path, worker_class: str | None, compiled: Path | None = None
) -> subprocess.Popen[bytes]:
    """`compiled`: the engine compiled by mypyc (tools/compile_engine.py) first on the path; the
    server starts in its folder, which gunicorn puts first itself (its `chdir`)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(compiled), str(ROOT)] if compiled else [str(ROOT)]),
        "GPU_ADMISSION_LOG_LEVEL": "INFO",  # as shipped: a JSON line a patch or denial (to /dev/null here)
        "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix="bench-metrics-"),
    }
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        "python:webhook.serving.gunicorn_conf",
        "--bind",
        f"127.0.0.1:{port}",
        "--certfile",
        str(cert_dir / "tls.crt"),
        "--keyfile",
        str(cert_dir / "tls.key"),
        *(["--worker-class", worker_class] if worker_class else []),
        app,
    ]
    where = compiled or ROOT
    process = subprocess.Popen(command, cwd=where, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=2)
            connection.request("POST", "/mutate", review(0), {"Content-Type": "application/json"})
            if connection.getresponse().status == 200:
                return process
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{app} did not start")


FLOOR = "floor"
FLOOR_LABEL = "TLS floor (no HTTP server)"


def start_floor(port: int, cert_dir: Path) -> multiprocessing.Process:
    answer = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {}}).encode()
    args = (port, str(cert_dir / "tls.crt"), str(cert_dir / "tls.key"), answer)
    process = multiprocessing.Process(target=serve_floor, args=args, daemon=True)
    process.start()
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            KeepAliveClient(port, str(cert_dir / "ca.crt")).exchange(KeepAliveClient.prepare("/mutate", b"{}"))
            return process
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the floor server did not start")


def client(port: int, ca: str, seconds: float, interval: float, path: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    connection = KeepAliveClient(port, ca)
    latencies: list[float] = []
    sent = [KeepAliveClient.prepare(path + "?timeout=5s", body) for body in bodies(path)]
    failures = 0
    end = time.monotonic() + seconds
    next_send = time.monotonic()
    i = 0
    while time.monotonic() < end:
        if interval:
            delay = next_send - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            next_send += interval
        started = time.perf_counter()
        status, _ = connection.exchange(sent[i % 64])
        latencies.append(time.perf_counter() - started)
        failures += status != 200
        i += 1
    out.put((latencies, failures))


def drive(port: int, ca: str, clients: int, seconds: float, rate: float, path: str) -> tuple[float, float, float]:
    queue: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    interval = clients / rate if rate else 0.0
    procs = [
        multiprocessing.Process(target=client, args=(port, ca, seconds, interval, path, queue)) for _ in range(clients)
    ]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    failures = sum(f for _, f in results)
    if failures:
        raise SystemExit(f"{failures} requests to {path} on port {port} were not answered 200")
    latencies = [x for lat, _ in results for x in lat]
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return len(latencies) / seconds, statistics.median(latencies) * 1000, p99 * 1000


def worker_pids(master: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def worker_rss_mib(master: int) -> list[float]:
    sizes = []
    for pid in worker_pids(master):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                sizes.append(int(line.split()[1]) / 1024)
    return sizes


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used, from /proc (the server's own processes)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(process: subprocess.Popen[bytes] | multiprocessing.Process) -> list[float]:
    """CPU seconds of each serving process: gunicorn's workers, or the floor's one process."""
    assert process.pid is not None
    pids = [process.pid]
    if isinstance(process, subprocess.Popen):
        pids = worker_pids(process.pid)
    return [cpu_seconds(pid) for pid in pids]


Figures = tuple[float, float, float]  # throughput, p50 ms, p99 ms


def median_of(rounds: list[Figures]) -> Figures:
    return (
        statistics.median(r[0] for r in rounds),
        statistics.median(r[1] for r in rounds),
        statistics.median(r[2] for r in rounds),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rate", type=float, default=300)
    parser.add_argument("--also-worker", help="another gunicorn worker class to measure beside the shipped one")
    parser.add_argument("--compiled", action="store_true", help="the webhook with the engine compiled by mypyc too")
    args = parser.parse_args()
    compiled = build(ROOT) if args.compiled else None
    cert_dir = Path(tempfile.mkdtemp(prefix="bench-certs-"))
    generate(cert_dir, "gpu-admission", "bench", ["localhost"], ["127.0.0.1"])
    ca = str(cert_dir / "ca.crt")
    subjects: dict[str, tuple[str, str, str | None, Path | None]] = {}
    for worker_class in (None, args.also_worker) if args.also_worker else (None,):
        suffix = f", {worker_class}" if worker_class else ""
        subjects[f"admission (/mutate){suffix}"] = ("webhook.wsgi:app", "/mutate", worker_class, None)
        subjects[f"admission (/validate){suffix}"] = ("webhook.wsgi:app", "/validate", worker_class, None)
        if compiled:
            subjects[f"compiled (/mutate){suffix}"] = ("webhook.wsgi:app", "/mutate", worker_class, compiled)
            subjects[f"compiled (/validate){suffix}"] = ("webhook.wsgi:app", "/validate", worker_class, compiled)
        subjects[f"bare Flask endpoint{suffix}"] = ("bench.bare_app:app", "/mutate", worker_class, None)
    subjects[FLOOR_LABEL] = (FLOOR, "/mutate", None, None)
    peaks: dict[str, list[Figures]] = {label: [] for label in subjects}
    paced: dict[str, list[Figures]] = {label: [] for label in subjects}
    rss: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {label: [] for label in subjects}  # server CPU µs a review, at peak
    Server = tuple[str, str | None, Path | None]
    servers: dict[Server, tuple[int, subprocess.Popen[bytes] | multiprocessing.Process]] = {}
    try:
        for app, _, worker_class, tree in subjects.values():
            if (app, worker_class, tree) not in servers:
                port = free_port()
                if app == FLOOR:
                    servers[app, worker_class, tree] = (port, start_floor(port, cert_dir))
                else:
                    servers[app, worker_class, tree] = (port, start(app, port, cert_dir, worker_class, tree))
        for _ in range(args.rounds):
            for label, (app, path, worker_class, tree) in subjects.items():
                port, process = servers[app, worker_class, tree]
                before = server_cpu(process)
                peaks[label].append(drive(port, ca, args.clients, args.seconds, 0, path))
                spent = [after - b for after, b in zip(server_cpu(process), before, strict=True)]
                cpu[label].append(sum(spent) / (peaks[label][-1][0] * args.seconds) * 1e6)
                paced[label].append(drive(port, ca, args.clients, args.seconds, args.rate, path))
                if app != FLOOR and process.pid:
                    rss[label] = worker_rss_mib(process.pid)
    finally:
        for _, process in servers.values():
            process.terminate()
            if isinstance(process, subprocess.Popen):
                process.wait(30)
    bare = median_of(peaks["bare Flask endpoint"])[0]
    print(
        "gunicorn, one worker (webhook.serving.worker.ConnectionWorker unless named), TLS 1.2+,"
        f" {args.clients} keep-alive client processes; medians of {args.rounds} rounds of {args.seconds:g} s;"
        " throughput ratios are to the bare endpoint under the shipped worker;"
        " server CPU a review at peak (from /proc, steadier than throughput on a shared machine)"
    )
    bare_cpu = statistics.median(cpu["bare Flask endpoint"])
    for label in subjects:
        peak, slow = median_of(peaks[label]), median_of(paced[label])
        ratios = ", ".join(
            f"{r[0] / b[0]:.2f}" for r, b in zip(peaks[label], peaks["bare Flask endpoint"], strict=True)
        )
        sizes = ", ".join(f"{r:.0f}" for r in rss.get(label, [])) or "-"
        print(
            f"  {label:30} peak {peak[0]:6.0f} rev/s ({peak[0] / bare:.2f}x bare; rounds {ratios})"
            f" p50 {peak[1]:.2f} ms p99 {peak[2]:.2f} ms"
        )
        own_cpu = statistics.median(cpu[label])
        print(f"  {'':30} server CPU {own_cpu:.0f} µs a review (bare's / this: {bare_cpu / own_cpu:.2f})")
        print(f"  {'':30} at {args.rate:g}/s: p50 {slow[1]:.2f} ms p99 {slow[2]:.2f} ms; worker RSS {sizes} MiB")


if __name__ == "__main__":
    main()
