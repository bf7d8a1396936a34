"""/mutate and /validate as a plain WSGI callable in front of the Flask app.

Why not Flask views: every GPU pod's creation waits on a review, and a Flask view costs a request
context, URL routing, a Request and a Response object and their hooks on each one, about a fifth
of a review's instructions (bench/serving_path.py measures both side by side). Here a review is
read straight from the WSGI environ, judged by one engine call and answered with prepared
headers. Everything else (health, readiness, /metrics, 404s) goes on to Flask, where a few
requests a second cost nothing that matters. The rules are the views' rules: every review an
HTTP 200, a request that is no review a short JSON 4xx, no traceback to a client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from webhook.metrics import REJECTED, latency_of, reviews_counted
from webhook.serving import admission, deadlines
from webhook.serving.http_errors import BadRequest, failed, rejected, status_line
from webhook.serving.review import AdmissionRequest, AdmissionResponse, parse_review
from webhook.state import EngineHolder

MAX_BODY = 3 * 1024 * 1024
log = logging.getLogger("gpu_admission.review")

Decide = Callable[[EngineHolder, AdmissionRequest], AdmissionResponse]
StartResponse = Callable[..., Any]
ENDPOINTS: dict[str, tuple[str, Decide]] = {
    "/mutate": ("mutate", admission.mutate),
    "/validate": ("validate", admission.validate),
}


def read_body(environ: dict[str, Any]) -> object:
    """The decoded JSON body, or BadRequest (415, 413, 400) saying what is wrong with it."""
    mimetype = environ.get("CONTENT_TYPE", "").partition(";")[0].strip().lower()
    if mimetype != "application/json":
        raise BadRequest("Content-Type must be application/json", 415)
    try:
        length = int(environ.get("CONTENT_LENGTH") or -1)
    except ValueError:
        raise BadRequest("Content-Length is not a number") from None
    if length > MAX_BODY:
        raise BadRequest("request body over 3 MiB", 413)
    if length >= 0:
        data = environ["wsgi.input"].read(length)
    elif environ.get("wsgi.input_terminated"):  # chunked: the server ends the stream; read one byte past the limit
        data = environ["wsgi.input"].read(MAX_BODY + 1)
    else:
        data = b""
    if len(data) > MAX_BODY:
        raise BadRequest("request body over 3 MiB", 413)
    deadlines.body_read()  # the request is in: the engine and the answer get their own time
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise BadRequest("body is not JSON") from None


def _log_review(
    endpoint: str, review: AdmissionRequest, answer: AdmissionResponse, decision: str, elapsed: float
) -> None:
    # What an operator asks about, a patch, a denial, a warning, is logged at INFO; a review that
    # changed and said nothing at DEBUG (as Gatekeeper logs only denials, and those on request).
    level = logging.INFO if answer.patch or answer.warnings or not answer.allowed else logging.DEBUG
    if log.isEnabledFor(level):
        fields = {
            "endpoint": endpoint,
            "uid": review.uid,
            "kind": review.kind.kind,
            "namespace": review.namespace,
            "name": review.display_name,
            "operation": review.operation.value,
            "dryRun": review.dry_run,
            "decision": decision,
            "latencyMs": round(elapsed * 1000, 3),
            "denial": answer.message or None,
        }
        log.log(level, "review", extra={"fields": fields})


def answer_review(holder: EngineHolder, endpoint: str, decide: Decide, environ: dict[str, Any]) -> bytes:
    """The AdmissionReview a request gets, as JSON; BadRequest where the request is no review."""
    started = time.perf_counter()
    review = parse_review(read_body(environ))
    answer = decide(holder, review)
    elapsed = time.perf_counter() - started
    decision = "patched" if answer.patch else "allowed" if answer.allowed else "denied"
    reviews_counted(endpoint, review.operation.value, decision, review.dry_run).inc()
    latency_of(endpoint).observe(elapsed)
    _log_review(endpoint, review, answer, decision, elapsed)
    return orjson.dumps(answer.to_review(review.api_version))


class ReviewEndpoints:
    """The WSGI app: reviews here, any other path to `rest` (the Flask app's own wsgi_app)."""

    __slots__ = ("holder", "rest")

    def __init__(self, holder: EngineHolder, rest: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.holder = holder
        self.rest = rest

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        route = ENDPOINTS.get(environ.get("PATH_INFO", ""))
        if route is None:
            return self.rest(environ, start_response)
        headers = [("Content-Type", "application/json")]
        code = 200
        if environ.get("REQUEST_METHOD") != "POST":
            code, body = 405, rejected(405, "Method Not Allowed")
            headers.append(("Allow", "POST"))
        else:
            try:
                body = answer_review(self.holder, route[0], route[1], environ)
            except BadRequest as error:
                code, body = error.code, rejected(error.code, error.message)
                REJECTED.labels(str(code)).inc()
            except Exception:
                code, body = 500, failed()
        headers.append(("Content-Length", str(len(body))))
        start_response(status_line(code), headers)
        return [body]
