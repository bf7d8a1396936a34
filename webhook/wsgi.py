"""The WSGI entry point for a plain gunicorn command line (the container image uses it)."""

from __future__ import annotations

import os
from pathlib import Path

from webhook import logs
from webhook.app import create_app
from webhook.server import build_holder

logs.configure(os.environ.get("GPU_ADMISSION_LOG_LEVEL", "INFO"))
_dirs = [Path(p) for p in os.environ.get("GPU_ADMISSION_POLICIES", "").split(":") if p]
app = create_app(
    build_holder(
        _dirs or None,
        fail_open=os.environ.get("GPU_ADMISSION_FAIL_OPEN") == "true",
        watch_namespace=os.environ.get("GPU_ADMISSION_WATCH_NAMESPACE", ""),
        all_namespaces=os.environ.get("GPU_ADMISSION_ALL_NAMESPACES") == "true",
    )
)
