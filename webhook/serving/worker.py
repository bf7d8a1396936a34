"""The gunicorn worker: gthread, except that a kept-alive connection stays on the thread that served it.

Under gthread, after every response a kept-alive connection goes back to the main thread's
poller, and its next request is handed to a pool thread again: two thread hand-offs, a pipe
write and a GIL ping-pong per review. On this project's 2-core VM (`perf stat` on one worker at
150 reviews/s) that was 8.6 context switches and 1.8 CPU migrations a review, against 2.0 and
0.02 here; `bench/load.py --also-worker gthread` puts the two side by side.

Here the thread that answered a request waits for the connection's next one itself, in poll()
with the GIL released. Each connection has a thread of its own: the pool holds
`worker_connections` threads, as many as gthread lets one worker hold connections, so a
connection waiting for its next request never holds up another. Everything else (accept, TLS,
parsing, the first-request timeout, keep-alive of `keepalive` seconds, max connections) is
gthread's.

On SIGTERM a waiting connection is kept STOP_KEEPALIVE_LINGER seconds more for a request the
client may already be sending (answered with `Connection: close`), then closed; SIGQUIT closes
it at once.

Connections are spread evenly over the workers (webhook.serving.connection_counts): a worker holding
more than its least loaded sibling waits up to ACCEPT_PATIENCE for that sibling to accept a new
connection, and accepts it itself only if the sibling does not.
"""

from __future__ import annotations

import contextlib
import os
import select
import ssl
import time
from concurrent import futures
from typing import Any

from gunicorn.workers.gthread import STOP_KEEPALIVE_LINGER, ThreadWorker

from webhook.metrics import connections_of
from webhook.serving.connection_counts import COUNTS

# A sibling that is not stopping wakes on the same listener and accepts within a millisecond or
# two; one that has not after 100 ms is stuck, and the connection is not kept waiting on it.
ACCEPT_PATIENCE = 0.1
ACCEPT_RECHECK = 0.001


class ConnectionWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn is untyped
    _stop_read = -1
    _stop_write = -1
    _quitting = False
    _connections = 0
    _alive = True
    slot: int | None = None  # in COUNTS, handed out by the master (gunicorn_conf.pre_fork)

    def init_process(self) -> None:
        self._stop_read, self._stop_write = os.pipe()
        super().init_process()

    def run(self) -> None:
        self._publish(self._connections)
        super().run()

    @property
    def alive(self) -> bool:
        return self._alive

    @alive.setter
    def alive(self, value: bool) -> None:
        # gunicorn clears `alive` on every way a worker stops (SIGTERM, SIGQUIT, SIGABRT,
        # max_requests, code reload, a lost master): from then on siblings must not leave new
        # connections to it.
        self._alive = value
        if not value and self.slot is not None:
            COUNTS.clear(self.slot)

    @property
    def nr_conns(self) -> int:
        return self._connections

    @nr_conns.setter
    def nr_conns(self, value: int) -> None:
        # gthread counts its connections here, on the main thread only.
        self._connections = value
        self._publish(value)

    def _publish(self, connections: int) -> None:
        if self.slot is not None and self.alive:
            COUNTS.set(self.slot, connections)
            connections_of(self.slot).set(connections)

    def accept(self, listener: Any) -> None:
        if not self._left_to_a_sibling(listener):
            super().accept(listener)

    def _left_to_a_sibling(self, listener: Any) -> bool:
        """Whether a sibling holding fewer connections took the connection waiting on the listener.

        Only the main thread waits here (the connections' own threads keep serving), and only while
        this worker holds more than another.
        """
        slot = self.slot
        if slot is None:
            return False
        give_up = time.monotonic() + ACCEPT_PATIENCE
        waiting = select.poll()
        waiting.register(listener, select.POLLIN)
        while self.alive and self._more_loaded_than_a_sibling(slot) and time.monotonic() < give_up:
            time.sleep(ACCEPT_RECHECK)
            if not waiting.poll(0):
                return True
        return not self.alive  # stopping meanwhile (SIGTERM): the connection is a sibling's to take

    def _more_loaded_than_a_sibling(self, slot: int) -> bool:
        fewest = COUNTS.fewest_besides(slot)
        return fewest is not None and self._connections > fewest

    def get_thread_pool(self) -> futures.ThreadPoolExecutor:
        return futures.ThreadPoolExecutor(max_workers=self.cfg.worker_connections)

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        self._wake_waiting()

    def handle_quit(self, sig: int, frame: Any) -> None:
        self._quitting = True
        self._wake_waiting()
        super().handle_quit(sig, frame)

    def is_parent_alive(self) -> bool:
        # gthread leaves `alive` set when the master is gone; waiting connections must still stop.
        if super().is_parent_alive():
            return True
        self.alive = False
        self._wake_waiting()
        return False

    def _wake_waiting(self) -> None:
        # Never read: the pipe stays readable, so every waiting thread sees it, now or later.
        with contextlib.suppress(OSError):
            os.write(self._stop_write, b"\0")

    def handle(self, conn: Any) -> Any:
        result = super().handle(conn)
        while result is True:
            if not self._next_request_arrives(conn):
                return False  # gthread's finish_request closes it
            result = super().handle(conn)
        return result

    def _next_request_arrives(self, conn: Any) -> bool:
        """Whether the connection sends another request before it idles past keepalive or the worker stops."""
        if self._quitting:
            return False
        sock = conn.sock
        if conn.parser.unreader.buf.getvalue() or (isinstance(sock, ssl.SSLSocket) and sock.pending()):
            return True  # already read ahead, out of poll()'s sight
        now = time.monotonic()
        deadline = now + self.cfg.keepalive
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        watching_stop = self.alive
        if watching_stop:
            poller.register(self._stop_read, select.POLLIN)
        else:
            deadline = min(deadline, now + STOP_KEEPALIVE_LINGER)
        while True:
            if watching_stop and not self.alive:
                if self._quitting:
                    return False
                poller.unregister(self._stop_read)
                watching_stop = False
                deadline = min(deadline, time.monotonic() + STOP_KEEPALIVE_LINGER)
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            # Woken by the stop pipe on a signal; the 1 s cap catches `alive` cleared any other way
            # (max_requests reached), so no thread outlives the worker's shutdown.
            events = poller.poll(min(left, 1.0) * 1000)
            if any(fd != self._stop_read for fd, _ in events):
                return True
