"""How long a client may take: every request has a deadline, and a connection past it is cut.

A thread that commits to a request arms a deadline (`arm`): the TLS handshake, the headers and
the body must all arrive within `read_timeout`. Once the application has read the body it says so
(`body_read`), and the deadline moves to `answer_timeout` for the engine and the response (a
client that stops reading its answer is cut too). One reaper thread shuts down the sockets of
overdue requests; the thread blocked reading them wakes at once, and the connection is closed.
So a client that sends a byte a second, or never finishes a handshake, holds a thread for a few
seconds at most, however many of them there are.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time

from webhook.metrics import connection_metrics
from webhook.service import Loop

log = logging.getLogger("gpu_admission.deadlines")
_current = threading.local()


class Deadlines:
    def __init__(self, read_timeout: float, answer_timeout: float, tick: float = 0.1) -> None:
        self.read_timeout = read_timeout
        self.answer_timeout = answer_timeout
        self.tick = tick
        self.cut = 0  # requests cut short, for tests and metrics
        # descriptor -> deadline. By descriptor: TLS wrapping detaches it from the socket object
        # the request began with, and the TLS socket keeps the same one.
        self._due: dict[int, float] = {}
        self._lock = threading.Lock()
        self._loop = Loop(
            "request-deadlines", lambda _: self._reap(), tick, lambda: log.exception("cutting requests failed"), join=5
        )

    def start(self) -> None:
        self._loop.start()

    def stop(self, wait: bool = True) -> None:
        self._loop.stop(wait)

    def arm(self, fd: int) -> None:
        """This thread now reads a request from the connection on `fd`: it must arrive within
        read_timeout. Disarmed before the connection is closed (so `fd` is never someone else's)."""
        with self._lock:
            self._due[fd] = time.monotonic() + self.read_timeout
        _current.entry = (self, fd)

    def disarm(self, fd: int) -> None:
        with self._lock:
            self._due.pop(fd, None)
        _current.entry = None

    def extend(self, fd: int) -> None:
        """The request is in: the engine and the response get answer_timeout."""
        with self._lock:
            if fd in self._due:
                self._due[fd] = time.monotonic() + self.answer_timeout

    def _reap(self) -> None:
        now = time.monotonic()
        with self._lock:  # cut under the lock: a disarmed (then closed) descriptor is never cut
            overdue = [fd for fd, deadline in self._due.items() if deadline <= now]
            for fd in overdue:
                del self._due[fd]
                # Counted before the cut: whoever sees the connection close sees it counted.
                self.cut += 1
                connection_metrics().cut.inc()
                cut_short(fd)
        if overdue:
            log.info("requests cut past their deadline", extra={"fields": {"count": len(overdue)}})


def cut_short(fd: int) -> None:
    """Shut the connection down under whoever is blocked on it (it wakes and closes it). Through a
    duplicate of the descriptor: shutting down a TLS socket object itself would pull its TLS
    state from under the thread reading it."""
    with contextlib.suppress(OSError, ValueError):
        duplicate = socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM)
        try:
            duplicate.shutdown(socket.SHUT_RDWR)
        finally:
            duplicate.close()


def body_read() -> None:
    """Called by the application once it has the whole body (a no-op outside the worker)."""
    entry = getattr(_current, "entry", None)
    if entry is not None:
        deadlines, fd = entry
        deadlines.extend(fd)
