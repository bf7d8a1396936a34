"""Reviews on a kept-alive connection, read and answered without gunicorn's HTTP objects.

Why: the API server sends every GPU pod twice (mutate, validate) over connections it keeps, and
gunicorn's request parsing, WSGI environ and response objects cost a review about as much as the
engine does (py-spy under bench/load.py: its parser alone about a third of the worker's Python).
The requests it sends are one narrow shape: `POST /mutate?timeout=10s HTTP/1.1`, a handful of
headers, a Content-Length body. That shape, and only that, is read here, strictly; anything else
(another method, path or protocol version, Transfer-Encoding, Expect, Upgrade, Connection, a
repeated Host, Content-Length or Content-Type, obs-fold, a name with `_`, a byte outside visible
ASCII, a body over the limit) is put back unread for gunicorn, which answers it exactly as it
did before. Deadlines hold as before: the worker arms them around this too.
"""

from __future__ import annotations

import io
import re
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple

from webhook.serving.http_errors import failed, status_line
from webhook.serving.review_endpoints import ENDPOINTS, MAX_BODY

HEAD_LIMIT = 8192  # request line and fields; gunicorn's own limits are of this order
FIELDS_LIMIT = 100
_PATHS = frozenset(path.encode() for path in ENDPOINTS)
_NAME = re.compile(rb"[!#$%&'*+\-.^`|~0-9A-Za-z]+\Z")  # an RFC 9110 token without "_"
_VALUE = re.compile(rb"[\t\x20-\x7e]*\Z")  # visible ASCII, space and tab
_QUERY = re.compile(rb"[!$&-;=?-~]*\Z")  # visible ASCII but '"', '#', '<', '>'
_PUT_BACK = frozenset({b"TRANSFER-ENCODING", b"EXPECT", b"UPGRADE", b"CONNECTION", b"TE", b"TRAILER"})
_SINGLE = frozenset({b"HOST", b"CONTENT-LENGTH", b"CONTENT-TYPE"})

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class LeanRequest(NamedTuple):
    path: str
    query: str
    headers: dict[str, str]  # the environ's HTTP_* keys, CONTENT_TYPE and CONTENT_LENGTH
    length: int


def parse_head(head: bytes) -> LeanRequest | None:
    """The review request whose head (up to the blank line, excluded) this is, or None where the
    head is anything but the narrow shape above."""
    lines = head.split(b"\r\n")
    request_line = lines[0].split(b" ")
    if len(request_line) != 3 or request_line[0] != b"POST" or request_line[2] != b"HTTP/1.1":
        return None
    path, _, query = request_line[1].partition(b"?")
    if path not in _PATHS or not _QUERY.match(query) or len(lines) - 1 > FIELDS_LIMIT:
        return None
    headers: dict[str, str] = {}
    seen: set[bytes] = set()
    length = -1
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _NAME.match(name):  # obs-fold starts with a space: no token
            return None
        value = value.strip(b" \t")
        upper = name.upper()
        if upper in _PUT_BACK or not _VALUE.match(value):
            return None
        if upper in _SINGLE:
            if upper in seen:
                return None
            seen.add(upper)
        if upper == b"CONTENT-LENGTH":
            if not value.isdigit() or len(value) > 9 or (length := int(value)) > MAX_BODY:
                return None
            headers["CONTENT_LENGTH"] = value.decode()
        elif upper == b"CONTENT-TYPE":
            headers["CONTENT_TYPE"] = value.decode()
        else:
            key = "HTTP_" + upper.decode().replace("-", "_")
            headers[key] = f"{headers[key]},{value.decode()}" if key in headers else value.decode()
    if length < 0 or b"HOST" not in seen:
        return None
    return LeanRequest(path.decode(), query.decode(), headers, length)


def read_request(unreader: Any) -> tuple[LeanRequest, bytes] | Literal[False] | None:
    """The next request on the connection and its body; None (everything read put back for
    gunicorn) where it is not one to answer here; False where the client closed the connection
    in the middle of it (or was cut past its deadline)."""
    data = b""
    while (end := data.find(b"\r\n\r\n")) < 0:
        if len(data) > HEAD_LIMIT:
            unreader.unread(data)
            return None
        chunk = unreader.read()
        if not chunk:
            unreader.unread(data)
            return None  # closed between requests: gunicorn's parser says so as it always did
        data += chunk
    request = parse_head(data[:end]) if end <= HEAD_LIMIT else None
    if request is None:
        unreader.unread(data)
        return None
    body = data[end + 4 :]
    if len(body) < request.length:
        missing = request.length - len(body)
        rest = unreader.read(missing, read_ahead=missing)
        if len(rest) < missing:
            return False
        body += rest
    elif len(body) > request.length:  # the next request, pipelined behind this one
        unreader.unread(body[request.length :])
        body = body[: request.length]
    return request, body


def environ_of(request: LeanRequest, body: bytes, server: tuple[str, int], peer: Any) -> dict[str, Any]:
    """The WSGI environ gunicorn would build for the request, to the keys the app reads and those
    WSGI requires."""
    peer_host, peer_port = (peer[0], str(peer[1])) if isinstance(peer, tuple) and len(peer) >= 2 else (str(peer), "")
    target = request.path + ("?" + request.query if request.query else "")
    return {
        "REQUEST_METHOD": "POST",
        "SCRIPT_NAME": "",
        "PATH_INFO": request.path,
        "QUERY_STRING": request.query,
        "RAW_URI": target,
        "REQUEST_URI": target,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]),
        "REMOTE_ADDR": peer_host,
        "REMOTE_PORT": peer_port,
        **request.headers,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "https",
        "wsgi.input": io.BytesIO(body),
        "wsgi.input_terminated": True,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }


def answered(app: App, environ: dict[str, Any], close: bool) -> bytes:
    """The whole HTTP response the app gives the request (`close`: the connection ends after it)."""
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        started[:] = [status, headers]
        return _no_write

    result = app(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        if hasattr(result, "close"):
            result.close()
    status, headers = started
    return _response(status, headers, body, close)


def failure() -> bytes:
    """The answer to a failure of the app itself (it answers its own errors; called where one is
    caught): errors.failed's logged 500, the connection closed after it."""
    return _response(status_line(500), [("Content-Type", "application/json")], failed(), close=True)


def _response(status: str, headers: list[tuple[str, str]], body: bytes, close: bool) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Date: {http_date()}", f"Connection: {'close' if close else 'keep-alive'}"]
    lines += [f"{name}: {value}" for name, value in headers if name.lower() not in ("content-length", "connection")]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _no_write(data: bytes) -> None:
    raise RuntimeError("the review app returns its body; it never calls write()")


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_date = (-1, "")  # one tuple, so threads never see one second's number with another's text


def http_date(now: float | None = None) -> str:
    """RFC 9110's IMF-fixdate (whatever the locale), made once a second."""
    global _date
    second = int(time.time() if now is None else now)
    if second != _date[0]:
        t = time.gmtime(second)
        text = f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year} "
        _date = (second, text + f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")
    return _date[1]
