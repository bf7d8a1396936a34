"""A real HTTPS server around the real app, for tests: generated CA, hostname checked."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server

from certs.files import CA_FILE, CERT_FILE, KEY_FILE, ensure_dev_certificates
from webhook.serving.app import create_app
from webhook.serving.tls import server_context
from webhook.state import EngineHolder


class Client:
    def __init__(self, port: int, ca_file: Path, hostname: str = "localhost") -> None:
        context = ssl.create_default_context(cafile=str(ca_file))
        self.connection = http.client.HTTPSConnection(hostname, port, context=context, timeout=10)

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        headers = {"Content-Type": content_type} if body is not None else {}
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        try:
            return response.status, json.loads(data)
        except ValueError:
            return response.status, data.decode()

    def review(self, path: str, review: dict[str, Any]) -> tuple[int, Any]:
        return self.request("POST", path + "?timeout=5s", json.dumps(review).encode())

    def close(self) -> None:
        self.connection.close()


@contextmanager
def https_server(holder: EngineHolder, cert_dir: Path) -> Iterator[tuple[int, Path]]:
    ensure_dev_certificates(cert_dir)
    context = server_context(str(cert_dir / CERT_FILE), str(cert_dir / KEY_FILE))
    server = make_server("127.0.0.1", 0, create_app(holder), threaded=True, ssl_context=context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port, cert_dir / CA_FILE
    finally:
        server.shutdown()
        thread.join(5)
