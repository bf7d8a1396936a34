"""gunicorn's own log lines (worker boots, signals, errors) as JSON, like every other line."""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

from webhook.logs import json_handlers


class JsonGunicornLogger(Logger):  # type: ignore[misc]  # gunicorn is untyped
    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        json_handlers(self.error_log)
        json_handlers(self.access_log)
