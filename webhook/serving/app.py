"""The Flask app factory. Views are thin: parse, one engine call, respond.

The two review endpoints are not Flask views: they are webhook.serving.review_endpoints, a plain
WSGI callable put in front of the app's own (Flask's middleware hook, `app.wsgi_app`), so a
review costs no request context; health, readiness and /metrics are views here.
"""

from __future__ import annotations

from flask import Flask, Response

from webhook.metrics import CONTENT_TYPE, exposition
from webhook.serving import http_errors
from webhook.serving.review_endpoints import MAX_BODY, ReviewEndpoints
from webhook.state import EngineHolder


def create_app(holder: EngineHolder, metrics_here: bool = True) -> Flask:
    """`metrics_here` False: /metrics has a port of its own (webhook.serving.metrics_port), and
    the webhook's port answers it 404."""
    app = Flask("gpu_admission")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    http_errors.register(app)
    app.wsgi_app = ReviewEndpoints(holder, app.wsgi_app)  # type: ignore[method-assign]

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
