"""`gpu-admission serve`: the webhook under gunicorn over TLS, on the embedded default if asked nothing."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from certs.files import CA_FILE, CERT_FILE, KEY_FILE, ensure_dev_certificates
from policies.errors import PolicyProblem
from webhook import background, gunicorn_conf, logs
from webhook.directories import DirectoryWatcher
from webhook.policy_store import PolicyStore
from webhook.sources import bundled_texts
from webhook.state import EngineHolder, Settings

log = logging.getLogger("gpu_admission.server")
DEFAULT_CERT_DIR = Path(".gpu-admission/certs")


def build_holder(
    policy_dirs: list[Path] | None, fail_open: bool = False, watch_namespace: str = "", all_namespaces: bool = False
) -> EngineHolder:
    """The engine holder and its policy sources: bundled, directories (reloaded) or ConfigMaps (watched)."""
    from webhook.metrics import LOAD_ERRORS

    holder = EngineHolder(Settings(fail_open=fail_open, policy_namespace=watch_namespace))

    def count(source: str, problems: list[PolicyProblem]) -> None:
        LOAD_ERRORS.inc(len(problems))
        holder.load_errors += len(problems)

    store = PolicyStore(holder, on_result=count)
    if watch_namespace:
        background.register(lambda: _watch_cluster(holder, store, watch_namespace, all_namespaces))
    elif policy_dirs:
        directories = DirectoryWatcher(policy_dirs, store)
        directories.check_once()
        background.register(directories.start)
    else:
        store.update("bundled", tuple(bundled_texts()))
    return holder


def _watch_cluster(holder: EngineHolder, store: PolicyStore, namespace: str, all_namespaces: bool) -> None:
    from kubernetes import config

    from webhook.cluster_watches import connect

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    connect(holder, store, namespace, all_namespaces=all_namespaces)


class WebhookServer(BaseApplication):  # type: ignore[misc]
    def __init__(self, app: Any, options: dict[str, Any]) -> None:
        self.application = app
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for name in dir(gunicorn_conf):
            if name in self.cfg.settings and not name.startswith("_"):
                self.cfg.set(name, getattr(gunicorn_conf, name))
        for name, value in self.options.items():
            self.cfg.set(name, value)

    def load(self) -> Any:
        return self.application


def serve(
    policy_dirs: list[Path] | None,
    bind: str,
    cert_dir: Path,
    workers: int,
    fail_open: bool,
    watch_namespace: str = "",
    all_namespaces: bool = False,
) -> None:
    logs.configure()
    if ensure_dev_certificates(cert_dir):
        log.info("dev certificates made", extra={"fields": {"ca": str(cert_dir / CA_FILE)}})
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gpu-admission-metrics-"))
    from webhook.app import create_app

    app = create_app(build_holder(policy_dirs, fail_open, watch_namespace, all_namespaces))
    log.info("serving", extra={"fields": {"bind": bind, "ca": str(cert_dir / CA_FILE), "workers": workers}})
    WebhookServer(
        app,
        {
            "bind": bind,
            "workers": workers,
            "certfile": str(cert_dir / CERT_FILE),
            "keyfile": str(cert_dir / KEY_FILE),
        },
    ).run()
