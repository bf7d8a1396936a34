"""A small in-process API server speaking the Kubernetes list/watch protocol for ConfigMaps:
resourceVersion, label selectors, watch streams, bookmarks, and 410 Gone for compacted history.
Driven through the real `kubernetes` client."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


class FakeKube:
    def __init__(self) -> None:
        self.version = 1
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []  # (version, resource, type, object)
        self.oldest = 0  # watches from before this resourceVersion get 410 Gone
        self.paused = False  # open watches deliver nothing while paused (a watch that fell behind)
        self.bookmarks = True
        self.changed = threading.Condition()
        self.server: ThreadingHTTPServer | None = None
        self.port = 0

    # -- what tests do ------------------------------------------------------------------------
    def put(self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> None:
        labels = labels if labels is not None else {"gpu-admission.io/policy": "true"}
        obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "data": data,
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
        }
        self._store("configmaps", obj)

    def put_pod(self, obj: dict[str, Any]) -> None:
        self._store("pods", obj)

    def _store(self, resource: str, obj: dict[str, Any]) -> None:
        with self.changed:
            self.version += 1
            metadata = obj["metadata"]
            key = (resource, metadata["namespace"], metadata["name"])
            kind = "MODIFIED" if key in self.objects else "ADDED"
            obj = {**obj, "metadata": {**metadata, "resourceVersion": str(self.version)}}
            self.objects[key] = obj
            self.events.append((self.version, resource, kind, obj))
            self.changed.notify_all()

    def delete(self, namespace: str, name: str, resource: str = "configmaps") -> None:
        with self.changed:
            self.version += 1
            obj = self.objects.pop((resource, namespace, name))
            gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
            self.events.append((self.version, resource, "DELETED", gone))
            self.changed.notify_all()

    def compact(self) -> None:
        """Forget the event history, as etcd compaction does: older watches get 410 Gone."""
        with self.changed:
            self.oldest = self.version
            self.events.clear()

    def start(self, port: int = 0) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
            with self.changed:
                self.changed.notify_all()

    # -- the protocol -------------------------------------------------------------------------
    @staticmethod
    def _selected(obj: dict[str, Any], selector: str) -> bool:
        labels = obj["metadata"].get("labels") or {}
        return all(labels.get(k) == v for k, v in (part.split("=", 1) for part in selector.split(",") if part))

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        url = urlparse(request.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = url.path.strip("/").split("/")
        if parts == ["api", "v1", "pods"]:
            resource, namespace = "pods", None
        elif parts[:3] == ["api", "v1", "namespaces"] and parts[4:] == ["configmaps"]:
            resource, namespace = "configmaps", parts[3]
        else:
            request.send_error(404)
            return
        selector = query.get("labelSelector", "")
        if query.get("watch", "").lower() in ("true", "1"):
            self._watch(
                request,
                resource,
                namespace,
                selector,
                int(query.get("resourceVersion") or 0),
                float(query.get("timeoutSeconds") or 30),
                query.get("allowWatchBookmarks") == "true",
            )
            return
        with self.changed:
            items = [
                o
                for (r, ns, _), o in sorted(self.objects.items())
                if r == resource and namespace in (None, ns) and self._selected(o, selector)
            ]
            body = {
                "apiVersion": "v1",
                "kind": "List",
                "metadata": {"resourceVersion": str(self.version)},
                "items": items,
            }
        data = json.dumps(body).encode()
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _watch(
        self,
        request: BaseHTTPRequestHandler,
        resource: str,
        namespace: str | None,
        selector: str,
        since: int,
        timeout: float,
        bookmarks: bool,
    ) -> None:
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.end_headers()

        def send(event: dict[str, Any]) -> None:
            request.wfile.write(json.dumps(event).encode() + b"\n")
            request.wfile.flush()

        if since < self.oldest:
            send(
                {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "code": 410,
                        "reason": "Expired",
                        "message": f"too old resource version: {since}",
                    },
                }
            )
            return
        import time

        end = time.monotonic() + timeout
        position = since
        try:
            while self.server is not None:
                with self.changed:
                    pending = [] if self.paused else [e for e in self.events if e[0] > position]
                    if not pending:
                        left = end - time.monotonic()
                        if left <= 0:
                            break
                        self.changed.wait(min(left, 0.5))
                        continue
                for version, kind_of, kind, obj in pending:
                    position = version
                    if (
                        kind_of == resource
                        and namespace in (None, obj["metadata"]["namespace"])
                        and self._selected(obj, selector)
                    ):
                        send({"type": kind, "object": obj})
            if bookmarks and self.bookmarks and self.server is not None:
                send(
                    {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": "ConfigMap",
                            "apiVersion": "v1",
                            "metadata": {"resourceVersion": str(self.version)},
                        },
                    }
                )
        except (BrokenPipeError, ConnectionResetError):
            pass
