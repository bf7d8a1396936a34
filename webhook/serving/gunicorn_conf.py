"""gunicorn settings for the webhook (`gunicorn -c python:webhook.serving.gunicorn_conf webhook.wsgi:app`).

Workers (webhook.serving.worker: gthread with a thread per connection) keep connections alive longer
than the API server's 90 s idle timeout, so its connection pool is reused, and share them out
evenly (each gets a slot in webhook.serving.connection_counts); on SIGTERM in-flight reviews finish
within graceful_timeout and idle keep-alive connections are closed.
"""

from __future__ import annotations

import gc
import os
from typing import Any

from webhook.serving.connection_counts import COUNTS
from webhook.serving.tls import ReloadingContext

bind = os.environ.get("GPU_ADMISSION_BIND", "0.0.0.0:8443")
workers = int(os.environ.get("GPU_ADMISSION_WORKERS", "2"))
worker_class = "webhook.serving.worker.ConnectionWorker"
worker_connections = int(os.environ.get("GPU_ADMISSION_CONNECTIONS", "256"))  # per worker, a thread each
keepalive = 120
timeout = 30
graceful_timeout = 20
preload_app = True
certfile = os.environ.get("GPU_ADMISSION_CERT", "/etc/gpu-admission/certs/tls.crt")
keyfile = os.environ.get("GPU_ADMISSION_KEY", "/etc/gpu-admission/certs/tls.key")
accesslog = None
errorlog = "-"
loglevel = "warning"

_contexts: dict[tuple[str, str], ReloadingContext] = {}


def ssl_context(config: Any, default_ssl_context_factory: Any) -> Any:
    key = (config.certfile, config.keyfile)
    if key not in _contexts:
        _contexts[key] = ReloadingContext(*key)
    return _contexts[key].get()


def pre_fork(server: Any, worker: Any) -> None:
    # Everything loaded so far (policies, compiled CEL, the libraries) lives as long as the worker:
    # frozen, the collector never walks it again, which keeps full collections off the p99, and
    # the pages it sits on stay shared with the master.
    gc.freeze()
    worker.slot = COUNTS.claim(sibling.slot for sibling in server.WORKERS.values())


def post_fork(server: Any, worker: Any) -> None:
    from webhook.serving import background

    background.start_all()


def child_exit(server: Any, worker: Any) -> None:
    slot = getattr(worker, "slot", None)
    if slot is not None:
        COUNTS.clear(slot)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
