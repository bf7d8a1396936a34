"""HTTP/1.1 over TLS at the least cost in Python, for bench/load.py: a keep-alive client, and the
floor server that shows what the machine and this client cost before any HTTP server runs.

Why not http.client: it spends a few hundred µs of its own on every request here (header
objects, an email parser per response), on the same two cores as the server, and all of it
landed in the measured latency. The API server's Go client spends microseconds. This client
sends prepared bytes and reads the status line, Content-Length and body, nothing more.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable


class KeepAliveClient:
    def __init__(self, port: int, ca: str, timeout: float = 10) -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = ssl.create_default_context(cafile=ca).wrap_socket(raw, server_hostname="localhost")
        self.buffer = b""

    @staticmethod
    def prepare(path: str, body: bytes) -> bytes:
        head = f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    def exchange(self, prepared: bytes) -> tuple[int, bytes]:
        """Send one prepared request; the response's status and body."""
        self.sock.sendall(prepared)
        message = read_message(self.sock.recv, self.buffer)
        if message is None:
            raise ConnectionError("server closed the connection")
        lines, body, self.buffer = message
        return int(lines[0].split()[1]), body


def read_message(receive: Callable[[int], bytes], buffer: bytes) -> tuple[list[bytes], bytes, bytes] | None:
    """One HTTP/1.1 message with a Content-Length, after what `buffer` already holds: its head's
    lines, its body and the bytes read past it; None if the peer closed before it began."""
    while b"\r\n\r\n" not in buffer:
        data = receive(65536)
        if not data:
            if buffer:
                raise ConnectionError("connection closed inside a message")
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(int(line[15:]) for line in lines if line[:15].lower() == b"content-length:")
    while len(rest) < length:
        data = receive(65536)
        if not data:
            raise ConnectionError("connection closed inside a message")
        rest += data
    return lines, rest[:length], rest[length:]


def serve_floor(port: int, cert: str, key: str, answer: bytes) -> None:
    """A TLS server that answers every request with fixed bytes, a thread a connection (run in its
    own process): the latency no HTTP server can go under on this machine with this client."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    response = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(answer),
        answer,
    )
    listener = socket.create_server(("127.0.0.1", port))

    def connection(raw: socket.socket) -> None:
        with context.wrap_socket(raw, server_side=True) as tls:
            buffer = b""
            while (message := read_message(tls.recv, buffer)) is not None:
                buffer = message[2]
                tls.sendall(response)

    while True:
        raw, _ = listener.accept()
        threading.Thread(target=connection, args=(raw,), daemon=True).start()
