"""gunicorn settings for the webhook (`gunicorn -c python:webhook.serving.gunicorn_conf webhook.wsgi:app`).

**One worker per replica.** A replica's view of its cluster (the watches, the quota ledger, the
reservations, the certificate manager) lives in the worker process: one process, one view, one
set of watch streams and exact reservations, whatever the machine. A worker count other than 1,
however it is given (`-w`, `GUNICORN_CMD_ARGS`), is refused at start with the reason; scale with
replicas. The worker (webhook.serving.worker) serves `GPU_ADMISSION_THREADS` requests at once and
holds at most `GPU_ADMISSION_CONNECTIONS` connections; requests have deadlines.

Connections are kept alive longer than the API server's 90 s idle timeout, so its connection pool
is reused; on SIGTERM in-flight reviews finish within graceful_timeout.
"""

from __future__ import annotations

import contextlib
import gc
import os
from typing import Any

from webhook.environment import current, metrics_directory  # reads no metric: before the emptying is fine


def _empty_multiprocess_directory() -> None:
    """A directory that survived a container restart (an emptyDir does) still holds the dead
    processes' files, whose figures would be added to this server's. Emptied before anything
    here imports prometheus_client: a metric makes its process's file as it is defined."""
    directory = metrics_directory()
    if directory and os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.endswith(".db"):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(directory, name))


_empty_multiprocess_directory()

from webhook.serving.tls import ReloadingContext  # noqa: E402  (after the emptying, which must come first)

_settings = current()  # parsed once, before gunicorn starts: one line per bad setting and exit 2
bind = _settings.bind
workers = 1
threads = _settings.threads
worker_class = "webhook.serving.worker.ConnectionWorker"
worker_connections = _settings.connections  # open, then refused
keepalive = 120
timeout = 30
graceful_timeout = 20
preload_app = True
certfile = str(_settings.cert)
keyfile = str(_settings.key)
ca_certs = str(_settings.client_ca) if _settings.client_ca else None  # clients must present a certificate it signed
accesslog = None
errorlog = "-"
loglevel = "warning"
logger_class = "webhook.serving.gunicorn_logs.JsonGunicornLogger"

_contexts: dict[tuple[str, str, str | None], ReloadingContext] = {}


def ssl_context(config: Any, default_ssl_context_factory: Any) -> Any:
    key = (config.certfile, config.keyfile, config.ca_certs)
    if key not in _contexts:
        _contexts[key] = ReloadingContext(*key)
    return _contexts[key].get()


def on_starting(server: Any) -> None:
    if server.cfg.workers != 1:
        raise SystemExit(
            f"gpu-admission runs one worker per replica, not {server.cfg.workers}: a replica's view of the "
            "cluster (watches, quota ledger, reservations) is one process's; run more replicas instead"
        )


def pre_fork(server: Any, worker: Any) -> None:
    # Everything loaded so far (policies, compiled CEL, the libraries) lives as long as the worker:
    # frozen, the collector never walks it again, which keeps full collections off the p99, and
    # the pages it sits on stay shared with the master.
    gc.freeze()


def post_fork(server: Any, worker: Any) -> None:
    from webhook.serving import background

    background.start_all()


def worker_exit(server: Any, worker: Any) -> None:
    from webhook.serving import background

    background.stop_all()


def child_exit(server: Any, worker: Any) -> None:
    if metrics_directory():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
