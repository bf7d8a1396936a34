"""The one place errors become HTTP. A malformed request is a 4xx with a short message; a policy
verdict is never an error (it is HTTP 200 with allowed: false); nothing else reaches a client.

The review endpoints (webhook.serving.review_endpoints, plain WSGI) and the Flask app's views
answer an error with the same body and log line, written here.
"""

from __future__ import annotations

import logging
from http import HTTPStatus

import orjson
from flask import Flask, Response
from werkzeug.exceptions import HTTPException

log = logging.getLogger("gpu_admission.http")


class BadRequest(Exception):
    """The request itself is wrong: answered with `code` and this message."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# Made once: every review answers with one, and an enum lookup a request is not free.
_STATUS_LINES = {status.value: f"{status.value} {status.phrase}" for status in HTTPStatus}


def status_line(code: int) -> str:
    """WSGI's status: `413 Request Entity Too Large`."""
    return _STATUS_LINES[code]


def rejected(code: int, message: str) -> bytes:
    """A request refused with `code`: logged, and its JSON body."""
    log.warning("rejected request", extra={"fields": {"code": code, "error": message}})
    return orjson.dumps({"error": message, "code": code})


def failed() -> bytes:
    """A fault outside any review (called where it is caught): logged with its traceback for the
    server, and the body the client gets, which holds none of it."""
    log.exception("unexpected error outside a review")
    return orjson.dumps({"error": "internal error", "code": 500})


def register(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Response:
        code = error.code or 500
        body = rejected(code, error.name if code != 413 else "request body over 3 MiB")
        return Response(body, status=code, mimetype="application/json")

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> Response:
        return Response(failed(), status=500, mimetype="application/json")
