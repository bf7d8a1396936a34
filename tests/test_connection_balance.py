"""Kept-alive connections are shared out evenly over gunicorn's workers.

A connection stays with the worker that accepted it for its whole life; the API server keeps a
few for a long time. Left to the race for accept(), a worker could hold most of them while the
others idle.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from certs.files import CA_FILE
from tests.server_harness import Client
from tests.test_serve_gunicorn import served  # noqa: F401  (a fixture)
from webhook.serving.connection_counts import ConnectionCounts


def worker_pids(master: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def established_on(port: int) -> set[str]:
    """Socket inodes of the connections accepted on the port and still open (IPv4, from /proc)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port and fields[3] == "01":  # ESTABLISHED
            inodes.add(fields[9])
    return inodes


def connections_held(pid: int, port: int) -> int:
    accepted = established_on(port)
    held = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:[") and target[8:-1] in accepted:
            held += 1
    return held


def published_counts(client: Client) -> list[float]:
    """Connections held by each worker, as /metrics publishes them."""
    _, text = client.request("GET", "/metrics")
    lines = [line for line in text.splitlines() if line.startswith("gpu_admission_worker_connections{")]
    return sorted(float(line.rsplit(" ", 1)[1]) for line in lines)


def only_connection_to_two_accepting_workers(port: int, ca: Path) -> Client:
    """A connection made once both workers accept (gunicorn forks them a moment apart) and hold
    no other connection (readiness probes closed meanwhile)."""
    client = Client(port, ca)
    deadline = time.monotonic() + 30
    while published_counts(client) != [0.0, 1.0]:
        assert time.monotonic() < deadline, published_counts(client)
        time.sleep(0.05)
    return client


def open_connections(port: int, ca: Path, count: int) -> list[Client]:
    clients = []
    for _ in range(count):
        client = Client(port, ca)
        assert client.request("GET", "/healthz")[0] == 200
        clients.append(client)
    return clients


def test_connections_opened_one_after_another_are_split_evenly_between_two_workers(served):  # noqa: F811
    port, cert_dir, process = served
    first = only_connection_to_two_accepting_workers(port, cert_dir / CA_FILE)
    clients = [first, *open_connections(port, cert_dir / CA_FILE, 5)]
    assert sorted(connections_held(pid, port) for pid in worker_pids(process.pid)) == [3, 3]
    assert published_counts(first) == [3.0, 3.0]
    _, metrics = clients[0].request("GET", "/metrics")
    published = [line for line in metrics.splitlines() if line.startswith("gpu_admission_worker_connections{")]
    assert sorted(float(line.rsplit(" ", 1)[1]) for line in published) == [3.0, 3.0]
    for client in clients:
        client.close()


def test_a_stuck_worker_does_not_keep_new_connections_waiting(served):  # noqa: F811
    """The busier worker leaves a new connection to its sibling only for a moment: a sibling that
    never accepts (here stopped) is waited for 100 ms, and then the connection is taken anyway."""
    port, cert_dir, process = served
    first = only_connection_to_two_accepting_workers(port, cert_dir / CA_FILE)
    stuck, *_ = (pid for pid in worker_pids(process.pid) if connections_held(pid, port) == 0)
    os.kill(stuck, signal.SIGSTOP)
    try:
        clients = [first, *open_connections(port, cert_dir / CA_FILE, 3)]
    finally:
        os.kill(stuck, signal.SIGCONT)
    assert connections_held(stuck, port) == 0
    for client in clients:
        client.close()


def _hold(counts: ConnectionCounts, slot: int, connections: int) -> None:
    counts.set(slot, connections)


def test_counts_written_by_a_forked_worker_are_seen_by_its_siblings():
    counts = ConnectionCounts(slots=4)
    first, second = counts.claim([]), counts.claim([0])
    child = multiprocessing.get_context("fork").Process(target=_hold, args=(counts, second, 5))
    child.start()
    child.join(10)
    assert counts.fewest_besides(first) == 5


@pytest.mark.parametrize(
    ("held", "claimed"),
    [([], 0), ([0, 1], 2), ([1, 0, 3], 2), ([None, 0], 1)],
    ids=["first worker", "next free", "a dead worker's slot", "workers without a slot"],
)
def test_a_new_worker_gets_the_lowest_slot_no_live_worker_holds(held, claimed):
    assert ConnectionCounts(slots=4).claim(held) == claimed


def test_a_full_table_gives_no_slot_and_the_worker_then_takes_any_connection():
    assert ConnectionCounts(slots=2).claim([0, 1]) is None


def test_the_fewest_connections_ignore_the_asking_worker_and_empty_or_stopping_slots():
    counts = ConnectionCounts(slots=4)
    for slot, connections in enumerate([7, 2, 4]):
        counts.claim(range(slot))
        counts.set(slot, connections)
    counts.clear(1)  # stopping: takes no more connections
    assert counts.fewest_besides(0) == 4
    assert counts.fewest_besides(2) == 7
    counts.clear(0)
    assert counts.fewest_besides(2) is None
