"""A round-robin TCP balancer on loopback: what a Service would be in front of several replicas
(there is no kube-proxy here). TLS passes through untouched; each connection goes to the next
replica in turn."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Sequence


class Balancer:
    def __init__(self, port: int, backends: Sequence[int]) -> None:
        self.backends = itertools.cycle(backends)
        self.listener = socket.create_server(("127.0.0.1", port), reuse_port=False)
        self.listener.settimeout(0.5)
        self.stopped = threading.Event()
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, name="balancer", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.lock:
                backend_port = next(self.backends)
            try:
                backend = socket.create_connection(("127.0.0.1", backend_port), timeout=5)
            except OSError:
                client.close()
                continue
            backend.settimeout(None)
            # Bytes go on as they come, as through kube-proxy: without this, Nagle's algorithm
            # holds a reply's tail for the peer's delayed ACK (40 ms a review, seen in bench/).
            for end in (client, backend):
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.connections += [client, backend]
            for source, target in ((client, backend), (backend, client)):
                threading.Thread(target=self._pipe, args=(source, target), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, target):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()
        self.thread.join(5)
        with self.lock:
            for connection in self.connections:
                connection.close()
