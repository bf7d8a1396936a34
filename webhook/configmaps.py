"""Policies from ConfigMaps labelled gpu-admission.io/policy=true: list, then watch from the
list's resourceVersion with bookmarks; relist on 410 Gone; reconnect with capped backoff. With
the API server unreachable the webhook keeps serving what it has; it is ready after the first
full list.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from webhook.policy_store import PolicyStore, Texts

log = logging.getLogger("gpu_admission.configmaps")
POLICY_LABEL = "gpu-admission.io/policy=true"


def texts_of(configmap: Any) -> tuple[str, Texts]:
    source = f"configmap/{configmap.metadata.namespace}/{configmap.metadata.name}"
    data = configmap.data or {}
    return source, tuple((f"{source}/{key}", data[key]) for key in sorted(data))


class ConfigMapWatcher:
    def __init__(
        self,
        api: client.CoreV1Api,
        namespace: str,
        store: PolicyStore,
        watch_seconds: int = 300,
        backoff: tuple[float, float] = (0.2, 30.0),
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.store = store
        self.watch_seconds = watch_seconds
        self.backoff = backoff
        self.synced = threading.Event()
        self.relists = 0
        self.expired = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="configmap-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        if self._thread is not None:
            self._thread.join(10)

    def _list(self) -> str:
        listed = self.api.list_namespaced_config_map(self.namespace, label_selector=POLICY_LABEL)
        self.store.replace_all(dict(texts_of(cm) for cm in listed.items))
        self.relists += 1
        self.synced.set()
        return str(listed.metadata.resource_version if listed.metadata else "")

    def _run(self) -> None:
        delay = self.backoff[0]
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch_from(version)
                delay = self.backoff[0]
            except ApiException as error:
                if error.status == 410:
                    self.expired += 1
                    log.info("watch expired (410 Gone), relisting")
                    version = None
                    continue
                log.warning("configmap watch failed", extra={"fields": {"status": error.status}})
                version = None
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])
            except Exception as error:  # connection refused, reset, timeouts: keep what we have
                log.warning(
                    "API server unreachable, serving the last good policies",
                    extra={"fields": {"error": type(error).__name__}},
                )
                version = None
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])

    def _watch_from(self, version: str) -> str:
        self._watch = watch.Watch()
        for event in self._watch.stream(
            self.api.list_namespaced_config_map,
            self.namespace,
            label_selector=POLICY_LABEL,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_seconds,
        ):
            kind, obj = event["type"], event["object"]
            if kind in ("ADDED", "MODIFIED"):
                self.store.update(*texts_of(obj))
            elif kind == "DELETED":
                self.store.remove(texts_of(obj)[0])
            if self._stop.is_set():
                break
        return str(self._watch.resource_version or version)
