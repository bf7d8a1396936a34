"""What the server knows per namespace: labels for `namespaceSelector`, kept from a namespace
watch, and the ResourceQuotas on whole GPUs, kept from a ResourceQuota watch.

A namespace the watch has not shown yet (just created: the pod can come right behind it) is read
once from the API server; with no cluster, only the `kubernetes.io/metadata.name` label the API
server gives every namespace is known.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from policies import limits_whole_gpus
from webhook.events import Events, NamespaceLabelsChanged

log = logging.getLogger("gpu_admission.namespaces")


def namespace_labels(namespace: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """A Namespace's name and labels."""
    metadata = namespace.get("metadata") or {}
    return str(metadata.get("name", "")), {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}


class NamespaceCache:
    """Labels by namespace; a change is published as NamespaceLabelsChanged on `events`."""

    def __init__(self, events: Events, fetch: Callable[[str], dict[str, Any] | None] | None = None) -> None:
        self._labels: dict[str, dict[str, str]] = {}
        self._fetch = fetch
        self._lock = threading.Lock()
        self._events = events

    def known(self, namespace: str) -> Mapping[str, str] | None:
        """The labels the watch has shown, never read from the API server."""
        return self._labels.get(namespace)

    def all(self) -> dict[str, Mapping[str, str]]:
        """Every namespace the watch has shown, with its labels."""
        with self._lock:
            return dict(self._labels)

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
        name, labels = namespace_labels(fetched)
        with self._lock:
            new = name not in self._labels
            labels = self._labels.setdefault(name, labels)
        if new:
            self._changed({name})
        return labels

    def observe(self, kind: str, namespace: dict[str, Any]) -> None:
        name, labels = namespace_labels(namespace)
        with self._lock:
            before = self._labels.get(name)
            if kind == "DELETED":
                self._labels.pop(name, None)
            else:
                self._labels[name] = labels
        if before != (None if kind == "DELETED" else labels):
            self._changed({name})

    def replace_all(self, namespaces: Iterable[dict[str, Any]]) -> None:
        fresh = dict(namespace_labels(ns) for ns in namespaces)
        with self._lock:
            before, self._labels = self._labels, fresh
        changed = {name for name in before.keys() | fresh.keys() if before.get(name) != fresh.get(name)}
        if changed:
            self._changed(changed)

    def _changed(self, names: set[str]) -> None:
        self._events.publish(NamespaceLabelsChanged(frozenset(names)))


class GpuQuotaCache:
    """Per namespace, the ResourceQuotas that limit `requests.nvidia.com/gpu`."""

    def __init__(self) -> None:
        self._quotas: set[tuple[str, str]] = set()
        self._by_namespace: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def names(self, namespace: str) -> tuple[str, ...]:
        return self._by_namespace.get(namespace, ())

    def by_namespace(self) -> dict[str, tuple[str, ...]]:
        return dict(self._by_namespace)

    def observe(self, kind: str, quota: dict[str, Any]) -> None:
        with self._lock:
            self._quotas.discard(_key(quota))
            if kind != "DELETED" and limits_whole_gpus(quota):
                self._quotas.add(_key(quota))
            self._index()

    def replace_all(self, quotas: Iterable[dict[str, Any]]) -> None:
        fresh = {_key(quota) for quota in quotas if limits_whole_gpus(quota)}
        with self._lock:
            self._quotas = fresh
            self._index()

    def _index(self) -> None:
        by_namespace: dict[str, list[str]] = {}
        for namespace, name in sorted(self._quotas):
            by_namespace.setdefault(namespace, []).append(name)
        self._by_namespace = {namespace: tuple(names) for namespace, names in by_namespace.items()}


def _key(quota: dict[str, Any]) -> tuple[str, str]:
    metadata = quota.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))
