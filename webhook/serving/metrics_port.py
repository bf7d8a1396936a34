"""/metrics on a port of its own, plain HTTP: Prometheus scrapes it from the monitoring namespace
while the webhook's TLS port answers only the API server (and the kubelet's probes); each port
gets its own NetworkPolicy rule. Served by a small thread of the worker, where the replica's
view (its quota figures) lives."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from webhook.environment import host_port

log = logging.getLogger("gpu_admission.server")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def serve_metrics(bind: str, render: Callable[[], bytes]) -> Callable[[], None]:
    """Starts serving GET /metrics (`render` builds the exposition) and returns what stops it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served here")
                return
            try:
                body = render()
            except Exception:
                log.exception("rendering /metrics failed")
                self.send_error(500, "metrics could not be rendered")
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
            pass  # every scrape is no news

    server = ThreadingHTTPServer(host_port(bind), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics served", extra={"fields": {"bind": bind}})

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return stop
