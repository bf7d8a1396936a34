"""The Flask app factory. Views are thin: parse, one engine call, respond."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import orjson
from flask import Flask, Response, request

from webhook.metrics import CONTENT_TYPE, REJECTED, exposition, latency_of, reviews_counted
from webhook.serving import admission, deadlines, errors
from webhook.serving.errors import BadRequest
from webhook.serving.review import AdmissionRequest, AdmissionResponse, parse_review
from webhook.state import EngineHolder

MAX_BODY = 3 * 1024 * 1024
log = logging.getLogger("gpu_admission.review")


def _body() -> object:
    # Straight from the WSGI environ: werkzeug's request properties and stream wrappers cost
    # about 30 µs a review here, as much as the JSON decoding.
    environ = request.environ
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


Decide = Callable[[EngineHolder, AdmissionRequest], AdmissionResponse]


def _review(endpoint: str, holder: EngineHolder, decide: Decide) -> Response:
    started = time.perf_counter()
    try:
        review = parse_review(_body())
        answer = decide(holder, review)
    except BadRequest as error:
        REJECTED.labels(str(error.code)).inc()
        raise
    elapsed = time.perf_counter() - started
    decision = "allowed" if answer.allowed else "denied"
    if answer.patch:
        decision = "patched"
    reviews_counted(endpoint, review.operation.value, decision, review.dry_run).inc()
    latency_of(endpoint).observe(elapsed)
    # What an operator asks about, a patch, a denial, a warning, is logged at INFO; a review that
    # changed and said nothing at DEBUG (as Gatekeeper logs only denials, and those on request).
    level = logging.INFO if answer.patch or answer.warnings or not answer.allowed else logging.DEBUG
    if log.isEnabledFor(level):
        log.log(
            level,
            "review",
            extra={
                "fields": {
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
            },
        )
    return Response(orjson.dumps(answer.to_review(review.api_version)), content_type="application/json")


def create_app(holder: EngineHolder, metrics_here: bool = True) -> Flask:
    """`metrics_here` False: /metrics has a port of its own (webhook.serving.metrics_port), and
    the webhook's port answers it 404."""
    app = Flask("gpu_admission")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    errors.register(app)

    @app.post("/mutate")
    def mutate() -> Response:
        return _review("mutate", holder, admission.mutate)

    @app.post("/validate")
    def validate() -> Response:
        return _review("validate", holder, admission.validate)

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        waiting, note = holder.readiness()
        if waiting:
            return Response(f"not ready: {waiting}\n", status=503, mimetype="text/plain")
        return Response(f"ready{f' ({note})' if note else ''}\n", mimetype="text/plain")

    if metrics_here:

        @app.get("/metrics")
        def metrics() -> Response:
            return Response(exposition(holder.quota_metrics()), mimetype=CONTENT_TYPE)

    return app
