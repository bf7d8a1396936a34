"""`gpu-admission serve`: the webhook under gunicorn over TLS, on the embedded default if asked nothing."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from certs.files import CA_FILE, CERT_FILE, KEY_FILE, ensure_dev_certificates
from policies.engine import Engine
from webhook import gunicorn_conf, logs
from webhook.quantity import parse_quantity
from webhook.sources import load_policies
from webhook.state import EngineHolder, Settings

log = logging.getLogger("gpu_admission.server")
DEFAULT_CERT_DIR = Path(".gpu-admission/certs")


def build_holder(policy_dirs: list[Path] | None, fail_open: bool = False) -> EngineHolder:
    from webhook.metrics import GENERATION, LOAD_ERRORS, POLICIES

    holder = EngineHolder(Settings(fail_open=fail_open))
    policy_set, result = load_policies(policy_dirs)
    for problem in result.problems:
        log.error("policy rejected", extra={"fields": {"problem": str(problem)}})
    LOAD_ERRORS.inc(len(result.problems))
    holder.load_errors = len(result.problems)
    GENERATION.set(policy_set.generation)
    POLICIES.set(len(policy_set.policies))
    holder.swap(Engine(policy_set, parse_quantity))
    return holder


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


def serve(policy_dirs: list[Path] | None, bind: str, cert_dir: Path, workers: int, fail_open: bool) -> None:
    logs.configure()
    if ensure_dev_certificates(cert_dir):
        log.info("dev certificates made", extra={"fields": {"ca": str(cert_dir / CA_FILE)}})
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gpu-admission-metrics-"))
    from webhook.app import create_app

    app = create_app(build_holder(policy_dirs, fail_open))
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
