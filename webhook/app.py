"""The Flask app factory. Views are thin: parse, one engine call, respond."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import orjson
from flask import Flask, Response, request

from webhook import admission, errors
from webhook.errors import BadRequest
from webhook.metrics import CONTENT_TYPE, LATENCY, REJECTED, REVIEWS, exposition
from webhook.review import AdmissionRequest, AdmissionResponse, parse_review
from webhook.state import EngineHolder

MAX_BODY = 3 * 1024 * 1024
log = logging.getLogger("gpu_admission.review")


def _body() -> object:
    if request.mimetype != "application/json":
        raise BadRequest("Content-Type must be application/json", 415)
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise BadRequest("request body over 3 MiB", 413)
    data = request.get_data(cache=False)
    if len(data) > MAX_BODY:
        raise BadRequest("request body over 3 MiB", 413)
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
    REVIEWS.labels(endpoint, review.operation.value, decision).inc()
    LATENCY.labels(endpoint).observe(elapsed)
    log.info(
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
    return Response(orjson.dumps(answer.to_review(review.api_version)), mimetype="application/json")


def create_app(holder: EngineHolder) -> Flask:
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
        if holder.ready:
            return Response("ready\n", mimetype="text/plain")
        return Response("no policy set loaded yet\n", status=503, mimetype="text/plain")

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(exposition(), mimetype=CONTENT_TYPE)

    return app
