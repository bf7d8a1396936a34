"""gunicorn run from Python (`gpu-admission serve`), with webhook.serving.gunicorn_conf's settings."""

from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication

from webhook.serving import gunicorn_conf


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
