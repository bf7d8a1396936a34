"""The WSGI entry point for a plain gunicorn command line (the container image uses it); its
settings come from the environment (webhook.replica.ServerConfig.from_env)."""

from __future__ import annotations

import os

from webhook import logs
from webhook.replica import ServerConfig, build_app, prepare_certificates

logs.configure(os.environ.get("GPU_ADMISSION_LOG_LEVEL", "INFO"))
_config = ServerConfig.from_env()
if _config.manage_certs:
    prepare_certificates(_config)
app = build_app(_config)
