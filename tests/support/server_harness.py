"""A real HTTPS server around the real app, for tests: generated CA, hostname checked."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server

from certs.cert_files import CA_FILE, CERT_FILE, KEY_FILE, ensure_dev_certificates
from policies.engine import Engine
from webhook.cluster.live import LOCAL, ClusterLink
from webhook.serving.app import create_app
from webhook.serving.tls import server_context
from webhook.state import AdmissionSettings, EngineHolder


class Client:
    def __init__(
        self, port: int, ca_file: Path, hostname: str = "localhost", certificate: tuple[Path, Path] | None = None
    ) -> None:
        context = ssl.create_default_context(cafile=str(ca_file))
        if certificate:  # a client certificate and its key, for servers that ask for one
            context.load_cert_chain(*certificate)
        self.connection = http.client.HTTPSConnection(hostname, port, context=context, timeout=10)

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        headers = {"Content-Type": content_type} if body is not None else {}
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        try:
            return response.status, json.loads(data)
        except ValueError:
            return response.status, data.decode()

    def review(self, path: str, review: dict[str, Any]) -> tuple[int, Any]:
        return self.request("POST", path + "?timeout=5s", json.dumps(review).encode())

    def close(self) -> None:
        self.connection.close()


@contextmanager
def https_server(holder: EngineHolder, cert_dir: Path) -> Iterator[tuple[int, Path]]:
    ensure_dev_certificates(cert_dir)
    context = server_context(str(cert_dir / CERT_FILE), str(cert_dir / KEY_FILE))
    server = make_server("127.0.0.1", 0, create_app(holder), threaded=True, ssl_context=context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port, cert_dir / CA_FILE
    finally:
        server.shutdown()
        thread.join(5)


def admission_review(
    obj: Any,
    operation: str = "CREATE",
    namespace: str | None = None,
    uid: str = "uid-1",
    username: str = "alice",
    groups: tuple[str, ...] = ("dev",),
    old: Any = None,
    sub_resource: str = "",
    dry_run: bool = False,
    kind: str | None = None,
    api_version: str | None = None,
) -> dict[str, Any]:
    """An AdmissionReview as the API server sends it: its namespace is the object's unless given,
    and its kind the URL's (`kind`, `api_version`: taken from the object unless given)."""
    fields = obj if isinstance(obj, dict) else {}
    metadata = fields.get("metadata") if isinstance(fields.get("metadata"), dict) else {}
    kind = kind or str(fields.get("kind") or "Pod")
    group, _, version = (api_version or str(fields.get("apiVersion") or "v1")).rpartition("/")
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "namespace": namespace if namespace is not None else str(metadata.get("namespace") or ""),
        "name": str(metadata.get("name") or ""),
        "dryRun": dry_run,
        "userInfo": {"username": username, "groups": list(groups)},
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def scale_review(
    plural: str, namespace: str, name: str, was: int, now: int, group: str = "apps", version: str = "v1"
) -> dict[str, Any]:
    """An AdmissionReview of a workload's Scale subresource as the API server sends it for
    `kubectl scale`: kind autoscaling/v1 Scale, resource the workload's, subResource scale."""

    def scale(replicas: int) -> dict[str, Any]:
        metadata = {"name": name, "namespace": namespace}
        return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": metadata, "spec": {"replicas": replicas}}

    request: dict[str, Any] = {
        "uid": f"scale-{name}-{was}-{now}",
        "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": group, "version": version, "resource": plural},
        "subResource": "scale",
        "operation": "UPDATE",
        "namespace": namespace,
        "name": name,
        "dryRun": False,
        "userInfo": {"username": "alice", "groups": ["dev"]},
        "object": scale(now),
        "oldObject": scale(was),
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@contextmanager
def api_server(holder: EngineHolder, cert_dir: Path) -> Iterator[ApiServer]:
    """The API server's side of admission against `holder` served over HTTPS."""
    with https_server(holder, cert_dir) as (port, ca):
        client = Client(port, ca)
        try:
            yield ApiServer(client)
        finally:
            client.close()


def holder_of(engine: Engine, link: ClusterLink = LOCAL) -> EngineHolder:
    """A replica's holder with `engine` in force (no cluster behind it, but what `link` reads)."""
    holder = EngineHolder(AdmissionSettings(), link=link)
    holder.swap(engine)
    return holder


class ApiServer:
    """The API server's side of admission, over real HTTPS: mutating webhook, its patch applied
    with an RFC 6902 implementation, then the validating webhook on the result."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def create(self, obj: dict[str, Any], **options: Any) -> tuple[bool, dict[str, Any], dict[str, Any]]:
        """(allowed, the object as it would be stored, the validating response)."""
        import base64

        import jsonpatch

        status, mutated = self.client.review("/mutate", admission_review(obj, **options))
        assert status == 200, mutated
        response = mutated["response"]
        if not response["allowed"]:
            return False, obj, response
        stored = obj
        if "patch" in response:
            stored = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
        status, judged = self.client.review("/validate", admission_review(stored, **options))
        assert status == 200, judged
        return judged["response"]["allowed"], stored, judged["response"]

    def update(self, old: dict[str, Any], new: dict[str, Any], **options: Any) -> tuple[bool, dict[str, Any]]:
        status, judged = self.client.review("/validate", admission_review(new, "UPDATE", old=old, **options))
        assert status == 200, judged
        return judged["response"]["allowed"], judged["response"]
