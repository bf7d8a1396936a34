"""One watch request: opened from a resourceVersion with bookmarks, read line by line, ended early
from another thread when asked. The list/watch loop (webhook.cluster.watches.listwatch) opens one after
another."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

JSON = dict[str, Any]


class WatchStream:
    def __init__(self, list_func: Callable[..., Any], args: tuple[Any, ...], selector: dict[str, str], seconds: int):
        self.list_func = list_func
        self.args = args
        self.selector = selector
        self.seconds = seconds
        self._response: Any = None

    def events(self, version: str, cancelled: Callable[[], bool]) -> Iterator[tuple[str, JSON, str]]:
        """(type, object, resourceVersion after it) for each ADDED, MODIFIED, DELETED or BOOKMARK
        event of one watch request; an ERROR event raises ApiException with its code (410: gone).
        `cancelled` is asked once the request is open: an interrupt that came while it was being
        opened found nothing to shut down."""
        response = self.list_func(
            *self.args,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.seconds,
            # A silent connection (a dead API server behind a live proxy) ends a little after the
            # server should have ended the watch itself.
            _request_timeout=(5.0, self.seconds + 30.0),
            _preload_content=False,
            **self.selector,
        )
        self._response = response
        try:
            if cancelled():
                return
            for line in iter_resp_lines(response):
                if not line:
                    continue
                event = orjson.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    raise ApiException(status=int(obj.get("code") or 500), reason=str(obj.get("message", "")))
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                yield str(kind), obj, version
        finally:
            self._response = None
            response.close()
            response.release_conn()

    def interrupt(self) -> None:
        """End the request in flight now. Closing its response from here would wait for the
        reading thread; shutting the socket down for reading wakes that thread at once."""
        response = self._response
        if response is not None:
            # Already finished or released: the loop sees its flags at its next turn.
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                response.shutdown()
