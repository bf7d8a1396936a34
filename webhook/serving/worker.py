"""The gunicorn worker: gthread, bounded so no client can stall it, and quick on kept-alive connections.

One worker per replica (webhook.serving.gunicorn_conf), with a pool of `threads`. What is changed
from gthread, and why:

- **Deadlines** (webhook.serving.deadlines): a request's TLS handshake, headers and body must
  arrive within `GPU_ADMISSION_READ_TIMEOUT` (5 s), its answer within 30 s more; a connection past
  its deadline is cut. A client that sends a byte a second holds a thread for 5 s, not forever.
  A new connection waits for its first bytes in the poller, not in a thread, and is closed if
  it says nothing for as long.
- **A request on the thread that answered the last one.** Under gthread, after every response a
  kept-alive connection goes back to the main thread's poller, and its next request is handed to a
  pool thread again: two thread hand-offs per review (`perf stat`: 8.6 context switches a review,
  against 2.0 here). Here the thread that answered waits up to ON_THREAD_WAIT (1 s) for the
  connection's next request; a connection quiet for longer goes back to the poller, which holds
  no thread: idle clients cannot pin threads either.
- **Connections are capped, the excess refused at once.** At `GPU_ADMISSION_CONNECTIONS` open
  connections per worker, a new one first takes the place of the longest-idle one (an idle
  client reconnects when it has something to say), and is reset only if none is idle, instead of
  waiting in the listen backlog while probes time out.
- **A failed TLS handshake is one JSON line**, at most a few a second (TLS_LINES_PER_SECOND),
  not a traceback.

On SIGTERM a connection waiting on its thread is handed to gthread, which keeps it briefly for a
request the client may already be sending (answered with `Connection: close`); SIGQUIT closes it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import selectors
import socket
import ssl
import struct
import time
from concurrent import futures
from functools import partial
from typing import Any

import gunicorn
from gunicorn.workers import gthread
from gunicorn.workers.gthread import ThreadWorker

from webhook.environment import current
from webhook.metrics import connection_metrics
from webhook.serving import lean_http
from webhook.serving.deadlines import Deadlines


# gthread internals this worker builds on (there since gunicorn 25.2): checked at import, so a
# gunicorn without them stops the server at start with this message, not with an AttributeError
# under load.
def missing_gthread_internals() -> list[str]:
    missing = []
    if not hasattr(gthread, "TConn"):
        missing.append("gthread.TConn")
    if not hasattr(ThreadWorker, "on_pending_socket_readable"):
        missing.append("ThreadWorker.on_pending_socket_readable")
    if not hasattr(ThreadWorker, "set_accept_enabled"):
        missing.append("ThreadWorker.set_accept_enabled")
    if not {"pending_conns", "keepalived_conns"} <= set(ThreadWorker.__init__.__code__.co_names):
        missing.append("ThreadWorker.pending_conns")
    return missing


if missing_gthread_internals():
    raise RuntimeError(
        f"gunicorn {gunicorn.__version__} lacks what gpu-admission's worker builds on "
        f"({', '.join(missing_gthread_internals())}): install gunicorn>=25.2,<28"
    )
ON_THREAD_WAIT = 1.0
ANSWER_TIMEOUT = 30.0
TLS_LINES_PER_SECOND = 5
log = logging.getLogger("gpu_admission.connections")


class _Connection(gthread.TConn):  # type: ignore[misc]
    """gthread's connection, with a close that never raises: gthread counts a connection gone,
    then closes it, and a close that raised (on a socket its TLS code had closed already) sent it
    to a handler that counted it gone again; bare connects and cut-short requests drove the count
    below zero (-39 after 40 of them)."""

    def close(self, graceful: bool = False) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().close(graceful)


gthread.TConn = _Connection  # accept() makes its connections from the module's name


class StopSignal:
    """A pipe the threads waiting on a connection poll beside it: written once as the worker
    stops, never read, so it stays readable and every waiting thread sees it, now or later."""

    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"\0")


class ConnectionWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn is untyped
    _stop: StopSignal | None = None
    _quitting = False
    _connections = 0
    max_connections = 0
    deadlines: Deadlines | None = None
    alive: bool  # gunicorn's: False once the worker stops

    def init_process(self) -> None:
        self._stop = StopSignal()
        self.max_connections = self.cfg.worker_connections
        self.deadlines = Deadlines(current().read_timeout, ANSWER_TIMEOUT)
        self.deadlines.start()
        self._tls_lines = _RateLimit(TLS_LINES_PER_SECOND)
        self._stop_said = False
        # gthread stops polling its listener at worker_connections; this worker refuses first.
        self.worker_connections = self.max_connections + 1
        super().init_process()  # runs the worker until it stops

    @property
    def nr_conns(self) -> int:
        return self._connections

    @nr_conns.setter
    def nr_conns(self, value: int) -> None:
        # gthread counts its connections here, on the main thread only.
        self._connections = value
        connection_metrics().open.set(value)

    def get_thread_pool(self) -> futures.ThreadPoolExecutor:
        return futures.ThreadPoolExecutor(max_workers=self.cfg.threads)

    # -- the cap ----------------------------------------------------------------------------------
    def accept(self, listener: Any) -> None:
        """A new connection waits in the poller until it sends something (gthread would wait for
        its first bytes in a pool thread: silent connections then queue for threads and cannot
        make room); one that says nothing within the read timeout is closed."""
        if self._connections >= self.max_connections and not self._evict_idle():
            self._refuse(listener)
            return
        try:
            client, address = listener.accept()
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = _Connection(self.cfg, client, address, listener.getsockname())  # non-blocking
        conn.timeout = time.monotonic() + (self.deadlines.read_timeout if self.deadlines else 5.0)
        self.pending_conns.append(conn)  # all with the same wait: the deque stays in timeout order
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    def _evict_idle(self) -> bool:
        """Close the longest-idle connection waiting in the poller; whether there was one."""
        for queue in (self.pending_conns, self.keepalived_conns):
            if queue:
                conn = queue.popleft()
                with contextlib.suppress(OSError, KeyError, ValueError):
                    self.poller.unregister(conn.sock)
                self.nr_conns -= 1
                conn.close()
                connection_metrics().evicted.inc()
                return True
        return False

    def _refuse(self, listener: Any) -> None:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        with contextlib.suppress(OSError):
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset, not FIN
        client.close()
        connection_metrics().refused.inc()

    # -- requests -----------------------------------------------------------------------------------
    def handle(self, conn: Any) -> Any:
        result = self._handle_one(conn)
        while result is True:
            arrived = self._next_request_arrives(conn)
            if arrived is None:
                return True  # quiet: back to gthread's poller, holding no thread
            if not arrived:
                return False  # gthread's finish_request closes it
            result = self._handle_one(conn, lean=True)
        return result

    def _handle_one(self, conn: Any, lean: bool = False) -> Any:
        """One request, under its deadline. `lean`: the connection is set up and blocking (it
        answered a request on this thread): a review is answered by lean_http if it can be."""
        fd = conn.sock.fileno()  # the TLS wrapper made in handle() keeps the same descriptor
        assert self.deadlines is not None
        self.deadlines.arm(fd)
        try:
            if lean and self.alive and len(self.keepalived_conns) < self.max_keepalived:
                kept = self._answer_lean(conn)
                if kept is not None:
                    return kept
            return super().handle(conn)
        finally:
            self.deadlines.disarm(fd)

    def _answer_lean(self, conn: Any) -> bool | None:
        """Whether the connection is kept after the review lean_http answered; None where the
        request is gunicorn's to read (put back unread)."""
        try:
            read = lean_http.read_request(conn.parser.unreader)
            if read is None or read is False:
                return read
            request, body = read
            self.nr += 1  # as gthread counts requests, for max_requests
            close = self.nr >= self.max_requests
            if close and self.alive:
                log.info("restarting the worker after this request (max_requests)")
                self.alive = False
            environ = lean_http.environ_of(request, body, conn.server, conn.client)
            try:
                response = lean_http.answered(self.wsgi, environ, close)
            except Exception:  # the review app answers its own failures; this is a bug
                response, close = lean_http.failure(), True
            conn.sock.sendall(response)
            return not close
        except OSError:  # the client went away, or was cut past its deadline
            return False

    def _next_request_arrives(self, conn: Any) -> bool | None:
        """True when the connection's next request arrives within ON_THREAD_WAIT, None when it
        stays quiet (or the worker stops: gthread then lingers on it briefly), False to close."""
        if self._quitting:
            return False
        sock = conn.sock
        if conn.parser.unreader.buf.getvalue() or (isinstance(sock, ssl.SSLSocket) and sock.pending()):
            return True  # already read ahead, out of poll()'s sight
        if not self.alive:
            return None
        assert self._stop is not None
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        poller.register(self._stop.read_fd, select.POLLIN)
        events = poller.poll(ON_THREAD_WAIT * 1000)
        if any(fd != self._stop.read_fd for fd, _ in events):
            return True
        return False if self._quitting else None

    def set_accept_enabled(self, enabled: bool) -> None:
        # Called from the main loop, never from the signal handler: safe to log. Said once, when
        # a stop begins (the cap on connections turns accepting off too, while alive).
        if not enabled and not self.alive and not self._stop_said:
            self._stop_said = True
            log.info(
                "stopping: no new connections, open ones answered first", extra={"fields": {"open": self.nr_conns}}
            )
        super().set_accept_enabled(enabled)

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        if self._stop is not None:
            self._stop.wake()

    def handle_quit(self, sig: int, frame: Any) -> None:
        self._quitting = True
        if self._stop is not None:
            self._stop.wake()
        super().handle_quit(sig, frame)

    def is_parent_alive(self) -> bool:
        if super().is_parent_alive():
            return True
        self.alive = False
        if self._stop is not None:
            self._stop.wake()
        return False

    # -- failures -------------------------------------------------------------------------------------
    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        """A TLS failure (a handshake that fails, a client that is no TLS client, a connection cut
        mid-record, one cut past its deadline) is one JSON line, rate-limited; no answer is sent."""
        if req is None and isinstance(exc, (ssl.SSLError, OSError)):
            allowed, suppressed = self._tls_lines.take()
            if allowed:
                fields = {"client": _peer(addr), "error": f"{type(exc).__name__}: {exc}", "suppressed": suppressed}
                log.warning("TLS handshake or connection failed", extra={"fields": fields})
            with contextlib.suppress(OSError):
                client.close()
            return
        if isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF):
            return  # the client went away (or was cut past its deadline) mid-request
        super().handle_error(req, client, addr, exc)


def _peer(addr: Any) -> str:
    return f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) and len(addr) >= 2 else str(addr)


class _RateLimit:
    """At most `per_second` lines a second, and how many were held back since the last one."""

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self._second = 0
        self._count = 0
        self._suppressed = 0

    def take(self) -> tuple[bool, int]:
        second = int(time.monotonic())
        if second != self._second:
            self._second, self._count = second, 0
        if self._count >= self.per_second:
            self._suppressed += 1
            return False, 0
        self._count += 1
        suppressed, self._suppressed = self._suppressed, 0
        return True, suppressed
