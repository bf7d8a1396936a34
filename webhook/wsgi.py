"""The WSGI entry point for a plain gunicorn command line (the container image uses it); its
settings come from the environment, parsed once (webhook.environment.current)."""

from __future__ import annotations

from webhook import logs
from webhook.environment import current
from webhook.replica import build_app, prepare_certificates

_config = current()
logs.configure(_config.log_level)
if _config.manage_certs:
    prepare_certificates(_config)
app = build_app(_config)
