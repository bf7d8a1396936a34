"""The one place errors become HTTP. A malformed request is a 4xx with a short message; a policy
verdict is never an error (it is HTTP 200 with allowed: false); nothing else reaches a client.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

log = logging.getLogger("gpu_admission.http")


class BadRequest(Exception):
    """The request itself is wrong: answered with `code` and this message."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _reply(message: str, code: int) -> tuple[Response, int]:
    return jsonify({"error": message, "code": code}), code


def register(app: Flask) -> None:
    @app.errorhandler(BadRequest)
    def bad_request(error: BadRequest) -> tuple[Response, int]:
        log.warning("rejected request", extra={"fields": {"code": error.code, "error": error.message}})
        return _reply(error.message, error.code)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> tuple[Response, int]:
        code = error.code or 500
        log.warning("rejected request", extra={"fields": {"code": code, "error": error.name}})
        return _reply(error.name if code != 413 else "request body over 3 MiB", code)

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> tuple[Response, int]:
        log.exception("unexpected error outside a review")
        return _reply("internal error", 500)
