"""A soak: `gpu-admission serve` as shipped (gunicorn, TLS, the bundled policies) under mixed valid and
malformed reviews, slow senders and bare connects, for minutes. Prints what must stay zero (5xx,
tracebacks in the server's log, answers over 2 s, worker restarts) and the worker's RSS after
warm-up and at the end.

    python bench/soak.py [--minutes 10] [--clients 4] [--slow 40]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from load import free_port, pod, review  # noqa: E402  (the script's own folder is on the path)
from wire import KeepAliveClient  # noqa: E402

SLOW_ANSWER = 2.0
HEADERS = b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 9999\r\n\r\n"


def malformed(i: int) -> bytes:
    """One of the ways a review can be wrong, each a 4xx."""
    choice = i % 6
    if choice == 0:
        return b"{not json"
    if choice == 1:
        return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode()
    obj = pod(i)
    container = obj["spec"]["containers"][0]  # type: ignore[index]
    if choice == 2:
        container["resources"]["limits"]["nvidia.com/gpu"] = "1e600000"
    elif choice == 3:
        container["resources"]["limits"]["nvidia.com/gpu"] = [1, 2]
    elif choice == 4:
        obj["spec"]["affinity"] = {"nodeAffinity": "everywhere"}  # type: ignore[index]
    else:
        obj["spec"]["containers"] = {"name": "x"}  # type: ignore[index]
    return review(i, obj)


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_status: dict[int, int] = {}
        self.slow = 0
        self.errors: dict[str, int] = {}
        self.worst = 0.0

    def add(self, status: int, seconds: float) -> None:
        with self.lock:
            self.by_status[status] = self.by_status.get(status, 0) + 1
            self.slow += seconds > SLOW_ANSWER
            self.worst = max(self.worst, seconds)

    def error(self, kind: str) -> None:
        with self.lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1


def reviewer(port: int, ca: str, until: float, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    client: KeepAliveClient | None = None
    i = seed * 1_000_000
    while time.monotonic() < until:
        i += 1
        path = rng.choice(["/mutate", "/validate"])
        body = malformed(i) if rng.random() < 0.3 else review(i)
        try:
            client = client or KeepAliveClient(port, ca)
            start = time.monotonic()
            status, _ = client.exchange(KeepAliveClient.prepare(path, body))
            tally.add(status, time.monotonic() - start)
        except (OSError, ConnectionError) as error:
            tally.error(type(error).__name__)
            client = None


def slow_sender(port: int, ca: str, until: float, tally: Tally) -> None:
    """Headers, then a byte a second, forever: the server must cut it at its deadline."""
    context = ssl.create_default_context(cafile=ca)
    while time.monotonic() < until:
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=10)
            with context.wrap_socket(raw, server_hostname="localhost") as sock:
                sock.sendall(HEADERS)
                while time.monotonic() < until:
                    sock.sendall(b" ")
                    time.sleep(1.0)
        except OSError:
            tally.error("slow sender cut (expected)")


def bare_connects(port: int, until: float, tally: Tally) -> None:
    while time.monotonic() < until:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        except OSError:
            tally.error("bare connect refused")
        time.sleep(0.05)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def workers_of(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(pid) for pid in children]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--slow", type=int, default=40)
    args = parser.parse_args()
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "PROMETHEUS_MULTIPROC_DIR": str(work / "metrics")}
    (work / "metrics").mkdir()
    log = (work / "server.log").open("wb")
    command = [
        sys.executable,
        "-m",
        "webhook.cli",
        "serve",
        "--bind",
        f"127.0.0.1:{port}",
        "--cert-dir",
        str(work / "certs"),
    ]
    server = subprocess.Popen(command, cwd=work, env=environment, stderr=log)
    ca = str(work / "certs" / "ca.crt")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            KeepAliveClient(port, ca).exchange(KeepAliveClient.prepare("/validate", review(0)))
            break
        except (OSError, ConnectionError):
            time.sleep(0.2)
    (first,) = workers_of(server.pid)
    until = time.monotonic() + args.minutes * 60
    tally = Tally()
    threads = [threading.Thread(target=reviewer, args=(port, ca, until, tally, i)) for i in range(args.clients)]
    threads += [threading.Thread(target=slow_sender, args=(port, ca, until, tally)) for _ in range(args.slow)]
    threads.append(threading.Thread(target=bare_connects, args=(port, until, tally)))
    for thread in threads:
        thread.daemon = True
        thread.start()
    time.sleep(min(60, args.minutes * 60 / 5))
    warm = rss_mib(first)
    for thread in threads:
        thread.join()
    end_rss = rss_mib(workers_of(server.pid)[0])
    restarts = int(workers_of(server.pid) != [first])
    server.send_signal(signal.SIGTERM)
    server.wait(60)
    log.close()
    lines = (work / "server.log").read_text().splitlines()
    not_json = [line for line in lines if not line.startswith("{")]
    tracebacks = sum("Traceback" in line for line in not_json) + sum('"traceback"' in line for line in lines)
    total = sum(tally.by_status.values())
    server_errors = sum(n for status, n in tally.by_status.items() if status >= 500)
    print(
        f"soak: {args.minutes:g} min, {args.clients} clients (30% malformed), {args.slow} slow senders, bare connects"
    )
    print(f"  answers: {total} ({', '.join(f'{s}: {n}' for s, n in sorted(tally.by_status.items()))})")
    print(
        f"  5xx: {server_errors}   answers over {SLOW_ANSWER:g} s: {tally.slow} (slowest {tally.worst * 1000:.0f} ms)"
    )
    print(f"  tracebacks in the server's log: {tracebacks}   lines that are no JSON: {len(not_json)}")
    print(f"  worker restarts: {restarts}")
    print(f"  worker RSS: {warm:.1f} MiB after warm-up, {end_rss:.1f} MiB at the end ({end_rss - warm:+.1f} MiB)")
    print(f"  client-side events: {tally.errors or 'none'}")


if __name__ == "__main__":
    main()
