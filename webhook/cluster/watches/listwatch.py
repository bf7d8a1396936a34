"""The Kubernetes list/watch loop, once: list (in pages), watch from the list's resourceVersion
(webhook.cluster.watches.watch_stream) with bookmarks, relist on 410 Gone or when asked, reconnect with
capped backoff. Objects reach
the handlers as plain JSON (what the API server sent), not client models; a page at a time, so a
list of 100,000 pods is never held whole.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from kubernetes.client.exceptions import ApiException

from webhook.cluster.watches.watch_stream import JSON, WatchStream
from webhook.metrics import HANDLER_ERRORS, RELISTS

log = logging.getLogger("gpu_admission.listwatch")
PAGE = 500


class HandlerFailed(RuntimeError):
    """The handler failed on a full list (logged with its traceback where it happened)."""


class ListWatch:
    def __init__(
        self,
        name: str,
        list_func: Callable[..., Any],
        args: tuple[Any, ...],
        on_list: Callable[[Iterator[JSON]], None],
        on_event: Callable[[str, JSON], None],
        label_selector: str = "",
        watch_seconds: int = 300,
        backoff: tuple[float, float] = (0.2, 30.0),
        page: int = PAGE,
        optional: bool = False,
    ) -> None:
        """`optional`: a resource the API server may not serve (404: an API group it does not
        have) is synced with nothing listed (on_list is not called: its handler can tell it was
        never listed), and asked for again after the longest backoff."""
        self.name = name
        self.list_func = list_func
        self.args = args
        self.on_list = on_list
        self.on_event = on_event
        self.selector = {"label_selector": label_selector} if label_selector else {}
        self.watch_seconds = watch_seconds
        self.backoff = backoff
        self.page = page
        self.optional = optional
        self.synced = threading.Event()
        self.relists = 0
        self.expired = 0
        self.error = ""  # why the thread stopped, if it ever does (it should not)
        self._stop = threading.Event()
        self._relist = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream = WatchStream(list_func, args, self.selector, watch_seconds)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._guarded_run, name=f"watch-{self.name}", daemon=True)
        self._thread.start()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def healthy(self) -> bool:
        """Not stopped by anything but a stop(): a watch that cannot watch must not look ready."""
        return not self.error

    def _guarded_run(self) -> None:
        try:
            self._run()
        except BaseException as error:  # the loop catches every failure it expects; this is a bug
            self.error = f"stopped: {type(error).__name__}: {error}"
            log.critical("watch thread stopped", exc_info=True, extra={"fields": {"watch": self.name}})
            raise

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        self._stream.interrupt()
        if wait and self._thread is not None:
            self._thread.join(10)

    def relist(self) -> None:
        """List again from scratch soon (the handlers' view of the objects changed, e.g. a new policy set)."""
        self._relist.set()
        self._stream.interrupt()

    def _pages(self, first: JSON) -> Iterator[JSON]:
        listed = first
        while True:
            yield from listed.get("items") or []
            token = (listed.get("metadata") or {}).get("continue")
            if not token:
                return
            listed = self._fetch(token)

    def _fetch(self, token: str | None = None) -> JSON:
        options: dict[str, Any] = {"limit": self.page, "_request_timeout": (5.0, 60.0), **self.selector}
        if token:
            options["_continue"] = token
        response = self.list_func(*self.args, _preload_content=False, **options)
        return dict(orjson.loads(response.data))

    def _list(self) -> str:
        self._relist.clear()
        first = self._fetch()
        items = self._pages(first)
        try:
            self.on_list(items)
        except Exception as error:
            # A handler bug, not the API server: said as what it is, and the list is tried again
            # after a backoff (readiness is not held hostage by it: the next one may get through).
            HANDLER_ERRORS.labels(self.name).inc()
            log.exception("watch handler failed on a list", extra={"fields": {"watch": self.name}})
            self.synced.set()
            raise HandlerFailed(str(error)) from error
        for _ in items:  # a handler that stopped early still leaves the pages read
            pass
        self.relists += 1
        RELISTS.labels(self.name).inc()
        self.synced.set()
        return str((first.get("metadata") or {}).get("resourceVersion") or "")

    def _run(self) -> None:
        delay = self.backoff[0]
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None or self._relist.is_set():
                    version = self._list()
                version = self._watch_from(version)
                delay = self.backoff[0]
            except HandlerFailed:
                version = None
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])
            except ApiException as error:
                version = None
                if error.status == 404 and self.optional:
                    self._absent()
                    continue
                if error.status == 410:
                    self.expired += 1
                    log.info("watch expired (410 Gone), relisting", extra={"fields": {"watch": self.name}})
                    continue
                log.warning("watch failed", extra={"fields": {"watch": self.name, "status": error.status}})
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])
            except Exception as error:  # refused, reset, timed out: keep serving what we have
                if self._relist.is_set() and not self._stop.is_set():
                    version = None
                    continue
                log.warning(
                    "API server unreachable, keeping what is loaded",
                    extra={"fields": {"watch": self.name, "error": type(error).__name__}},
                )
                version = None
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])

    def _absent(self) -> None:
        if not self.synced.is_set():
            log.info("resource not served, watching for it later", extra={"fields": {"watch": self.name}})
            self.synced.set()
        self._stop.wait(self.backoff[1])

    def _watch_from(self, version: str) -> str:
        """One watch request, streamed event by event; returns the last resourceVersion seen."""
        last = version
        for kind, obj, last in self._stream.events(version, self._relist.is_set):  # noqa: B007
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self._deliver(kind, obj)
            if self._stop.is_set() or self._relist.is_set():
                break
        return last

    def _deliver(self, kind: str, obj: JSON) -> None:
        """One event to the handler; a handler failing on one object does not stop the watch."""
        try:
            self.on_event(kind, obj)
        except Exception:
            HANDLER_ERRORS.labels(self.name).inc()
            metadata = obj.get("metadata") or {}
            where = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
            log.exception("watch handler failed", extra={"fields": {"watch": self.name, "object": where}})
