"""The engine in force: swapped whole, read without locks (one attribute store is atomic)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from policies.engine import Engine
from webhook.usage_tracker import PodUsageTracker


@dataclass(frozen=True)
class Settings:
    fail_open: bool = False


class EngineHolder:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._engine: Engine | None = None
        self.usage = PodUsageTracker(lambda: self._engine.policy_set if self._engine else None)
        self._ready = threading.Event()
        self.load_errors = 0

    @property
    def engine(self) -> Engine | None:
        return self._engine

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def swap(self, engine: Engine) -> None:
        self._engine = engine
        self._ready.set()
