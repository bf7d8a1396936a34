"""The fixed-answer Go webhook (bench/fixed_webhook) for bench/control_plane.py: built and cached,
started on gpu-admission's port with its replica's certificate, answering every review allowed,
with no patch or, given one, with the patch gpu-admission itself answered a bench pod with.

The second tells apart what a patch costs the API server (applying it, decoding the pod again,
running the mutating chain again) from what gpu-admission's own process costs: the first is the
product's to pay, whatever serves it."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.e2e.harness import Installation
from tests.support.reviews import review
from tools.compile_engine import CACHE

SOURCE = Path(__file__).resolve().parent / "fixed_webhook"


def binary() -> Path:
    """bench/fixed_webhook built with the machine's Go (standard library only), cached by its source."""
    source = b"".join((SOURCE / name).read_bytes() for name in ("go.mod", "main.go"))
    built: Path = CACHE.parent / f"fixed-webhook-{hashlib.sha256(source).hexdigest()[:16]}"
    if not built.exists():
        built.parent.mkdir(parents=True, exist_ok=True)
        env = os.environ | {"CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
        subprocess.run(["go", "build", "-o", str(built), "."], cwd=SOURCE, env=env, check=True)
    return built


@contextlib.contextmanager
def serving(installed: Installation, patch: Path | None = None) -> Iterator[int]:
    """The fixed-answer webhook on gpu-admission's port with its replica's certificate (whose CA is
    the configurations' caBundle), `patch` its answer to /mutate if given: its process id."""
    certs = installed.workdir / "gpu-admission-0-certs"
    command = [str(binary()), f"-addr=127.0.0.1:{installed.port}"]
    command += [f"-cert={certs / 'tls.crt'}", f"-key={certs / 'tls.key'}"]
    command += [f"-patch={patch}"] if patch else []
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield process.pid
    finally:
        process.terminate()
        process.wait(10)


def answered_patch(installed: Installation, arriving: dict[str, object], namespace: str) -> bytes:
    """The JSON patch gpu-admission's running replica answers for `arriving` (a pod as the API
    server sends it to the webhook: defaulted, the built-in plugins' changes made), in `namespace`."""
    pod = json.loads(json.dumps(arriving))
    pod["metadata"]["namespace"] = namespace
    body = json.dumps(review(pod, namespace=namespace)).encode()  # type: ignore[no-untyped-call]
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # loopback, our own replica
    request = urllib.request.Request(
        f"https://127.0.0.1:{installed.port}/mutate", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        response = json.loads(answer.read())["response"]
    if not response.get("allowed") or "patch" not in response:
        raise RuntimeError(f"gpu-admission answered no patch for the bench pod: {response}")
    return base64.b64decode(response["patch"])
