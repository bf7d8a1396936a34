"""Namespace labels for `namespaceSelector`, kept from a namespace watch.

A namespace the watch has not shown yet (just created: the pod can come right behind it) is read
once from the API server; with no cluster, only the `kubernetes.io/metadata.name` label the API
server gives every namespace is known.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

log = logging.getLogger("gpu_admission.namespaces")


def _labels(namespace: dict[str, Any]) -> tuple[str, dict[str, str]]:
    metadata = namespace.get("metadata") or {}
    return str(metadata.get("name", "")), {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}


class NamespaceCache:
    def __init__(self, fetch: Callable[[str], dict[str, Any] | None] | None = None) -> None:
        self._labels: dict[str, dict[str, str]] = {}
        self._fetch = fetch
        self._lock = threading.Lock()

    def set_fetch(self, fetch: Callable[[str], dict[str, Any] | None]) -> None:
        self._fetch = fetch

    def labels(self, namespace: str) -> Mapping[str, str] | None:
        found = self._labels.get(namespace)
        if found is not None or self._fetch is None or not namespace:
            return found
        try:
            fetched = self._fetch(namespace)
        except Exception as error:  # unreachable API server: judge with what is known
            log.warning("namespace unreadable", extra={"fields": {"namespace": namespace, "error": str(error)}})
            return None
        if fetched is None:
            return None
        name, labels = _labels(fetched)
        with self._lock:
            self._labels.setdefault(name, labels)
        return labels

    def observe(self, kind: str, namespace: dict[str, Any]) -> None:
        name, labels = _labels(namespace)
        with self._lock:
            if kind == "DELETED":
                self._labels.pop(name, None)
            else:
                self._labels[name] = labels

    def replace_all(self, namespaces: Iterable[dict[str, Any]]) -> None:
        fresh = dict(_labels(ns) for ns in namespaces)
        with self._lock:
            self._labels = fresh
