"""The Kubernetes list/watch loop, once: list, watch from the list's resourceVersion with
bookmarks, relist on 410 Gone, reconnect with capped backoff. Objects reach the handlers as
plain JSON (what the API server sent), not client models.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

log = logging.getLogger("gpu_admission.listwatch")
JSON = dict[str, Any]


class ListWatch:
    def __init__(
        self,
        name: str,
        list_func: Callable[..., Any],
        args: tuple[Any, ...],
        on_list: Callable[[list[JSON]], None],
        on_event: Callable[[str, JSON], None],
        label_selector: str = "",
        watch_seconds: int = 300,
        backoff: tuple[float, float] = (0.2, 30.0),
    ) -> None:
        self.name = name
        self.list_func = list_func
        self.args = args
        self.on_list = on_list
        self.on_event = on_event
        self.selector = {"label_selector": label_selector} if label_selector else {}
        self.watch_seconds = watch_seconds
        self.backoff = backoff
        self.synced = threading.Event()
        self.relists = 0
        self.expired = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: Any = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            response.close()
        if self._thread is not None:
            self._thread.join(10)

    def _list(self) -> str:
        response = self.list_func(*self.args, _preload_content=False, **self.selector)
        listed = json.loads(response.data)
        self.on_list(listed.get("items") or [])
        self.relists += 1
        self.synced.set()
        return str((listed.get("metadata") or {}).get("resourceVersion") or "")

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
                version = None
                if error.status == 410:
                    self.expired += 1
                    log.info("watch expired (410 Gone), relisting", extra={"fields": {"watch": self.name}})
                    continue
                log.warning("watch failed", extra={"fields": {"watch": self.name, "status": error.status}})
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])
            except Exception as error:  # refused, reset, timed out: keep serving what we have
                log.warning(
                    "API server unreachable, keeping what is loaded",
                    extra={"fields": {"watch": self.name, "error": type(error).__name__}},
                )
                version = None
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])

    def _watch_from(self, version: str) -> str:
        """One watch request, streamed line by line; returns the last resourceVersion seen."""
        response = self.list_func(
            *self.args,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_seconds,
            _preload_content=False,
            **self.selector,
        )
        self._response = response
        try:
            for line in iter_resp_lines(response):
                if not line:
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise ApiException(status=int(obj.get("code") or 500), reason=str(obj.get("message", "")))
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self.on_event(kind, obj)
                if self._stop.is_set():
                    break
        finally:
            response.close()
            response.release_conn()
            self._response = None
        return version
