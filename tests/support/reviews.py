"""AdmissionReviews as the API server sends them, to the Flask test client."""

from __future__ import annotations

import json

from tests.support.builders import gpu_container, plain_container, pod


def review(
    obj,
    operation="CREATE",
    kind="Pod",
    group="",
    version="v1",
    uid="uid-1",
    dry_run=False,
    api_version="admission.k8s.io/v1",
    namespace="team-a",
):
    return {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "operation": operation,
            "namespace": namespace,
            "name": "",
            "dryRun": dry_run,
            "userInfo": {"username": "alice", "groups": ["dev"]},
            "object": obj,
        },
    }


def gpu_pod(labels=None):
    return pod(gpu_container(gpus="1"), plain_container(), namespace="team-a", labels=labels)


def send_chunked(client, path, body, chunk=64 * 1024):
    """A body sent without Content-Length, in chunks (Transfer-Encoding: chunked)."""
    pieces = (body[i : i + chunk] for i in range(0, len(body), chunk))
    client.connection.request(
        "POST", path, body=pieces, headers={"Content-Type": "application/json"}, encode_chunked=True
    )
    response = client.connection.getresponse()
    return response.status, json.loads(response.read())
