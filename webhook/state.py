"""The engine in force, and what the server knows of the cluster: swapped whole, read without
locks (one attribute store is atomic)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from policies.engine import Engine
from policies.policyset import PolicySet
from webhook.cluster_state import LiveCluster
from webhook.namespaces import GpuQuotaCache, NamespaceCache
from webhook.usage_tracker import PodUsageTracker


@dataclass(frozen=True)
class Settings:
    fail_open: bool = False
    # The webhook's own namespace: policy ConfigMaps there are cluster-wide, elsewhere namespaced.
    policy_namespace: str = ""


class EngineHolder:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._engine: Engine | None = None
        self.namespaces = NamespaceCache()
        self.usage = PodUsageTracker(self._policy_set, cluster=lambda: self.cluster)
        self.quotas = GpuQuotaCache()
        self.cluster = LiveCluster(self.namespaces, self.usage.capacity, self.quotas)
        self._loaded = threading.Event()
        self._syncs: list[threading.Event] = []
        self._listeners: list[Callable[[], None]] = []
        self.load_errors = 0

    def _policy_set(self) -> PolicySet | None:
        return self._engine.policy_set if self._engine else None

    @property
    def engine(self) -> Engine | None:
        return self._engine

    @property
    def ready(self) -> bool:
        """A policy set is loaded and every cluster watch has listed once."""
        return self._loaded.is_set() and all(synced.is_set() for synced in self._syncs)

    def require_sync(self, synced: threading.Event) -> None:
        self._syncs.append(synced)

    def on_swap(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def swap(self, engine: Engine) -> None:
        self._engine = engine
        self._loaded.set()
        for listener in self._listeners:
            listener()
