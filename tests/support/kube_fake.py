"""A small in-process API server speaking the Kubernetes protocol, driven through the real client.

Any resource, namespaced or cluster-wide, in the core group or another: list (with label
selectors), watch (resourceVersion, bookmarks, 410 Gone for compacted history), get, create
(409 AlreadyExists), update (409 Conflict on a stale resourceVersion), merge patch, delete.
Tests put and change objects directly and read what the webhook wrote.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

CLUSTER_SCOPED = frozenset(
    {
        "namespaces",
        "nodes",
        "deviceclasses",
        "resourceslices",
        "devicetaintrules",
        "gpupolicies",
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    }
)
KINDS = {
    "configmaps": "ConfigMap",
    "pods": "Pod",
    "namespaces": "Namespace",
    "nodes": "Node",
    "events": "Event",
    "leases": "Lease",
    "secrets": "Secret",
    "resourcequotas": "ResourceQuota",
    "resourceclaims": "ResourceClaim",
    "resourceclaimtemplates": "ResourceClaimTemplate",
    "deviceclasses": "DeviceClass",
    "resourceslices": "ResourceSlice",
    "devicetaintrules": "DeviceTaintRule",
    "podgroups": "PodGroup",
    "mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
    "validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
}
Key = tuple[str, str, str]  # (resource, namespace or "", name)


class Route:
    """What a request path names: a resource, maybe a namespace, maybe one object."""

    def __init__(self, path: str) -> None:
        parts = path.strip("/").split("/")
        self.valid = True
        self.group_version = "v1"
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            rest = parts[3:]
            self.group_version = f"{parts[1]}/{parts[2]}"
        else:
            rest, self.valid = [], False
        self.namespace: str | None = None
        self.name = ""
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            self.namespace, self.resource, rest = rest[1], rest[2], rest[3:]
        elif rest:
            self.resource, rest = rest[0], rest[1:]
        else:
            self.resource, self.valid = "", False
        if rest:
            self.name = rest[0]
        if self.resource == "namespaces" and self.namespace is None and self.name:
            self.namespace = ""


class _ApiServerSocket(ThreadingHTTPServer):
    """Accepts as kube-apiserver does: Go listens with the kernel's largest backlog (somaxconn),
    Python's socketserver with 5. Past 5 connections waiting to be accepted, the kernel drops the
    next SYN and the client sends it again a second later: a burst of admissions that each open a
    connection for a Lease read then waited 1-2 s, which no real API server makes them wait (one
    run in two of tests/server/test_replicas.py's 1,000 creates, traced to those reads)."""

    request_queue_size = 4096


@dataclass(frozen=True)
class Request:
    """One request as the API server's audit log would show it."""

    method: str
    resource: str
    name: str
    verb: str  # get, list, watch, create, update, patch, delete
    agent: str  # the User-Agent header: who asked

    @classmethod
    def of(cls, request: BaseHTTPRequestHandler, method: str, route: Route, query: dict[str, str]) -> Request:
        if method == "GET":
            verb = "get" if route.name else "watch" if query.get("watch") in ("true", "1") else "list"
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
        return cls(method, route.resource, route.name, verb, request.headers.get("User-Agent", ""))


class FakeKube:
    def __init__(self) -> None:
        self.forbidden: set[str] = set()  # resources whose reads answer 403, as RBAC would
        self.unserved: set[str] = set()  # resources of an API group this server lacks: 404
        # API versions it lacks: 404 (PodGroups are served at v1beta1 alone, as Kubernetes 1.37 does)
        self.unserved_versions: set[str] = {"scheduling.k8s.io/v1alpha2"}
        self.version = 1
        self.objects: dict[Key, dict[str, Any]] = {}
        self.history: list[tuple[int, str, str, dict[str, Any]]] = []  # (version, resource, type, object)
        self.oldest = 0  # watches from before this resourceVersion get 410 Gone
        self.paused = False  # open watches deliver nothing while paused (a watch that fell behind)
        self.bookmarks = True
        self.writes: list[tuple[str, str, str]] = []  # (method, resource, name) of every write, in order
        self.pages = 0  # list pages served
        self.requests: list[Request] = []  # every request, in order
        self.open_watches: Counter[tuple[str, str]] = Counter()  # (agent, resource) -> streams open now
        self.changed = threading.Condition()
        self._serving: threading.Thread | None = None
        self.server: ThreadingHTTPServer | None = None
        self.port = 0

    # -- what tests do ------------------------------------------------------------------------
    def put(self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> None:
        """A ConfigMap, labelled as a policy unless labels say otherwise."""
        labels = labels if labels is not None else {"gpu-admission.io/policy": "true"}
        metadata = {"name": name, "namespace": namespace, "labels": labels}
        self.store("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "data": data, "metadata": metadata})

    def put_pod(self, obj: dict[str, Any]) -> None:
        self.store("pods", obj)

    def store(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.changed:
            metadata = obj["metadata"]
            key = (resource, "" if resource in CLUSTER_SCOPED else metadata.get("namespace", ""), metadata["name"])
            kind = "MODIFIED" if key in self.objects else "ADDED"
            return self._record(key, kind, obj)

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.changed:
            return self.objects.get((resource, namespace, name))

    def items(self, resource: str) -> list[dict[str, Any]]:
        with self.changed:
            return [o for (r, _, _), o in sorted(self.objects.items()) if r == resource]

    def delete(self, namespace: str, name: str, resource: str = "configmaps") -> None:
        with self.changed:
            self.version += 1
            obj = self.objects.pop((resource, namespace, name))
            gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
            self.history.append((self.version, resource, "DELETED", gone))
            self.changed.notify_all()

    def compact(self) -> None:
        """Forget the event history, as etcd compaction does: older watches get 410 Gone."""
        with self.changed:
            self.oldest = self.version
            self.history.clear()

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig file pointing at this server, for code that loads its own configuration."""
        cluster = {"name": "fake", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}
        context = {"name": "fake", "context": {"cluster": "fake", "user": "webhook"}}
        config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster], "contexts": [context]}
        path.write_text(json.dumps({**config, "users": [{"name": "webhook", "user": {}}], "current-context": "fake"}))
        return path

    def wait_for(self, predicate: Any, timeout: float = 10) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    def _record(self, key: Key, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        metadata = {**obj.get("metadata", {}), "resourceVersion": str(self.version)}
        metadata.setdefault("uid", f"uid-{key[0]}-{key[1]}-{key[2]}")
        if key[1]:
            metadata["namespace"] = key[1]
        stored = {"apiVersion": obj.get("apiVersion", "v1"), "kind": KINDS.get(key[0], ""), **obj, "metadata": metadata}
        self.objects[key] = stored
        self.history.append((self.version, key[0], kind, stored))
        self.changed.notify_all()
        return stored

    # -- serving ------------------------------------------------------------------------------
    def start(self, port: int = 0) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 for chunked watch streams, each event a chunk, as the API server sends them
            # (a client reading a plain stream waits for a full buffer); one request a connection.
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake.handle_get(self)

            def do_POST(self) -> None:
                fake.handle_write(self, "POST")

            def do_PUT(self) -> None:
                fake.handle_write(self, "PUT")

            def do_PATCH(self) -> None:
                fake.handle_write(self, "PATCH")

            def do_DELETE(self) -> None:
                fake.handle_write(self, "DELETE")

        self.server = _ApiServerSocket(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        # serve_forever looks for shutdown() once a poll: 0.5 s by default, which every test's
        # teardown would wait.
        self._serving = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._serving.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
            if self._serving is not None:
                self._serving.join(5)
            with self.changed:
                self.changed.notify_all()

    @staticmethod
    def _reply(request: BaseHTTPRequestHandler, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        request.send_response(code)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.send_header("Connection", "close")
        request.end_headers()
        request.wfile.write(data)

    @staticmethod
    def _status(code: int, reason: str, message: str) -> dict[str, Any]:
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
        return {**status, "code": code, "reason": reason, "message": message}

    @staticmethod
    def _selected(obj: dict[str, Any], selector: str) -> bool:
        labels = obj["metadata"].get("labels") or {}
        return all(labels.get(k) == v for k, v in (part.split("=", 1) for part in selector.split(",") if part))

    def handle_get(self, request: BaseHTTPRequestHandler) -> None:
        url = urlparse(request.path)
        route = Route(url.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if not route.valid:
            request.send_error(404)
            return
        self.log(Request.of(request, "GET", route, query))
        if route.resource in self.forbidden:
            self._reply(request, 403, self._status(403, "Forbidden", f"{route.resource} is forbidden"))
            return
        if route.resource in self.unserved or route.group_version in self.unserved_versions:
            self._reply(request, 404, self._status(404, "NotFound", "the server could not find the requested resource"))
            return
        if route.name:
            with self.changed:
                obj = self.objects.get((route.resource, route.namespace or "", route.name))
            if obj is None:
                self._reply(request, 404, self._status(404, "NotFound", f"{route.resource} {route.name} not found"))
            else:
                self._reply(request, 200, obj)
            return
        selector = query.get("labelSelector", "")
        if query.get("watch", "").lower() in ("true", "1"):
            self._watch(request, route, selector, query)
            return
        with self.changed:
            items = [
                o
                for (r, ns, _), o in sorted(self.objects.items())
                if r == route.resource and route.namespace in (None, ns) and self._selected(o, selector)
            ]
            metadata = {"resourceVersion": str(self.version)}
        if query.get("limit"):
            start, size = int(query.get("continue") or 0), int(query["limit"])
            if start + size < len(items):
                metadata["continue"] = str(start + size)
            items = items[start : start + size]
            self.pages += 1
        # As the real API server lists: the kind on the list (PodList), none on its items.
        kind = next((o.get("kind") for o in items if o.get("kind")), "")
        items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]
        list_body = {"apiVersion": route.group_version, "kind": f"{kind}List", "metadata": metadata, "items": items}
        self._reply(request, 200, list_body)

    def handle_write(self, request: BaseHTTPRequestHandler, method: str) -> None:
        route = Route(urlparse(request.path).path)
        self.log(Request.of(request, method, route, {}))
        length = int(request.headers.get("Content-Length") or 0)
        body = json.loads(request.rfile.read(length) or b"{}")
        namespace = route.namespace or ""
        with self.changed:
            name = route.name or (body.get("metadata") or {}).get("name", "")
            if method == "POST" and not name and (body.get("metadata") or {}).get("generateName"):
                name = body["metadata"]["generateName"] + str(self.version)
                body["metadata"]["name"] = name
            key = (route.resource, namespace, name)
            existing = self.objects.get(key)
            self.writes.append((method, route.resource, name))
            if method == "POST":
                if existing is not None:
                    self._reply(request, 409, self._status(409, "AlreadyExists", f"{name} already exists"))
                    return
                self._reply(request, 201, self._record(key, "ADDED", body))
                return
            if existing is None:
                self._reply(request, 404, self._status(404, "NotFound", f"{route.resource} {name} not found"))
                return
            if method == "DELETE":
                wanted = (body.get("preconditions") or {}).get("resourceVersion")
                if wanted and wanted != existing["metadata"]["resourceVersion"]:
                    message = "Precondition failed: the object has been modified"
                    self._reply(request, 409, self._status(409, "Conflict", message))
                    return
                self.objects.pop(key)
                self.version += 1
                self.history.append((self.version, route.resource, "DELETED", existing))
                self.changed.notify_all()
                self._reply(request, 200, existing)
                return
            if method == "PUT":
                wanted = (body.get("metadata") or {}).get("resourceVersion")
                if wanted and wanted != existing["metadata"]["resourceVersion"]:
                    message = "the object has been modified; please apply your changes to the latest version"
                    self._reply(request, 409, self._status(409, "Conflict", message))
                    return
                updated = body
            else:
                updated = _merge(existing, body)
            if updated == existing:
                self._reply(request, 200, existing)  # a no-op write changes no resourceVersion
                return
            self._reply(request, 200, self._record(key, "MODIFIED", updated))

    def log(self, entry: Request) -> None:
        with self.changed:
            self.requests.append(entry)

    def requests_by(self, agent_part: str, verb: str = "", resource: str = "") -> list[Request]:
        with self.changed:
            return [
                r
                for r in self.requests
                if agent_part in r.agent and verb in ("", r.verb) and resource in ("", r.resource)
            ]

    def _watch(self, request: BaseHTTPRequestHandler, route: Route, selector: str, query: dict[str, str]) -> None:
        stream = (request.headers.get("User-Agent", ""), route.resource)
        with self.changed:
            self.open_watches[stream] += 1
        try:
            self._stream_events(request, route, selector, query)
        finally:
            with self.changed:
                self.open_watches[stream] -= 1
                if not self.open_watches[stream]:
                    del self.open_watches[stream]

    def _stream_events(
        self, request: BaseHTTPRequestHandler, route: Route, selector: str, query: dict[str, str]
    ) -> None:
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Transfer-Encoding", "chunked")
        request.send_header("Connection", "close")
        request.end_headers()

        def send(event: dict[str, Any]) -> None:
            line = json.dumps(event).encode() + b"\n"
            request.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            request.wfile.flush()

        try:
            self._send_events(route, selector, query, send)
            request.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_events(self, route: Route, selector: str, query: dict[str, str], send: Any) -> None:
        since = int(query.get("resourceVersion") or 0)
        if since < self.oldest:
            send({"type": "ERROR", "object": self._status(410, "Expired", f"too old resource version: {since}")})
            return
        end = time.monotonic() + float(query.get("timeoutSeconds") or 30)
        position = since
        while self.server is not None:
            with self.changed:
                pending = [] if self.paused else [e for e in self.history if e[0] > position]
                if not pending:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self.changed.wait(min(left, 0.5))
                    continue
            for version, resource, kind, obj in pending:
                position = version
                namespace = obj["metadata"].get("namespace", "")
                wanted = resource == route.resource and route.namespace in (None, namespace)
                if wanted and self._selected(obj, selector):
                    send({"type": kind, "object": obj})
        if query.get("allowWatchBookmarks") == "true" and self.bookmarks and self.server is not None:
            bookmark = {"kind": KINDS.get(route.resource, ""), "apiVersion": "v1"}
            send({"type": "BOOKMARK", "object": {**bookmark, "metadata": {"resourceVersion": str(self.version)}}})


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (the client sends strategic merge for core kinds; for the
    metadata and data fields tests use, the two agree)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result
