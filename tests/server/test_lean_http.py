"""Reviews on a kept-alive connection are read without gunicorn's HTTP objects
(webhook.serving.lean_http), and only where that reading is gunicorn's own.

The law: whatever head lean_http accepts, gunicorn's parser reads the same request from it (the
same path, query, headers, body length), and the server answers a request the same whether it
comes first on a connection (gunicorn reads it) or after another (lean_http reads it, or puts it
back for gunicorn).
"""

from __future__ import annotations

import io
import json
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.http.parser import RequestParser
from gunicorn.http.wsgi import create as wsgi_environ
from hypothesis import given, settings
from hypothesis import strategies as st

from certs.cert_files import CA_FILE
from tests.support.processes import serving
from tests.support.reviews import gpu_pod, review
from webhook.serving import lean_http
from webhook.serving.lean_http import parse_head

pytestmark = pytest.mark.slow

BODY = json.dumps(review(gpu_pod({"team": "a"}), namespace="ml")).encode()
# What the API server sends (Go's net/http client, k8s.io/apiserver's webhook client).
API_SERVER_HEAD = (
    "POST /mutate?timeout=10s HTTP/1.1\r\nHost: gpu-admission.gpu-admission.svc:443\r\n"
    f"User-Agent: kube-apiserver-admission\r\nContent-Length: {len(BODY)}\r\n"
    "Accept: application/json, */*\r\nContent-Type: application/json\r\nAccept-Encoding: gzip"
).encode()


def gunicorn_reads(head: bytes, body: bytes) -> dict[str, Any] | None:
    """The WSGI environ gunicorn makes of the request (None where it refuses it)."""

    class Source:
        def __init__(self) -> None:
            self.data = io.BytesIO(head + b"\r\n\r\n" + body)

        def recv(self, size: int) -> bytes:
            return self.data.read(size)

    config = Config()
    config.set("forwarded_allow_ips", "127.0.0.1")
    try:
        request = next(RequestParser(config, Source(), ("10.0.0.1", 5000)))
        _, environ = wsgi_environ(request, None, ("10.0.0.1", 5000), ("0.0.0.0", 8443), config)
        environ["lean.body"] = request.body.read()
    except Exception:
        return None
    return environ


def test_what_the_api_server_sends_is_read_here() -> None:
    read = parse_head(API_SERVER_HEAD)
    assert read is not None
    assert (read.path, read.query, read.length) == ("/mutate", "timeout=10s", len(BODY))
    assert read.headers == {
        "HTTP_HOST": "gpu-admission.gpu-admission.svc:443",
        "HTTP_USER_AGENT": "kube-apiserver-admission",
        "CONTENT_LENGTH": str(len(BODY)),
        "HTTP_ACCEPT": "application/json, */*",
        "CONTENT_TYPE": "application/json",
        "HTTP_ACCEPT_ENCODING": "gzip",
    }


@pytest.mark.parametrize(
    "head",
    [
        b"GET /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 0",
        b"POST /mutate HTTP/1.0\r\nHost: x\r\nContent-Length: 5",
        b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5",
        b"POST /mut%61te HTTP/1.1\r\nHost: x\r\nContent-Length: 5",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nHost: y\r\nContent-Length: 5",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: +5",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length : 5",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX_Forwarded_For: 1.2.3.4",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-A: b\r\n c",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-A: b\x00c",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX-A: caf\xc3\xa9",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue",
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close",
        b"POST /mutate HTTP/1.1\r\nContent-Length: 5",
        b"POST /mutate HTTP/1.1\r\nHost: x",
        b"POST  /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5",
        b"POST /mutate?a#b HTTP/1.1\r\nHost: x\r\nContent-Length: 5",
    ],
)
def test_anything_else_is_left_to_gunicorn(head: bytes) -> None:
    assert parse_head(head) is None


NAMES = ["Host", "Content-Length", "Content-Type", "User-Agent", "Accept", "X-Trace", "Transfer-Encoding"]
NAMES += ["X_Trace", "Expect", "Connection", "content-length", "HOST", "Accept-Encoding", "X-Forwarded-Proto"]
VALUES = ["", "x", "  padded\t", "5", "+5", "05", "chunked", "100-continue", "a\tb", "close", "application/json"]


REQUEST_LINES = ["POST /mutate HTTP/1.1", "POST /validate?timeout=10s HTTP/1.1", "POST /mutate?a=b&c HTTP/1.1"]
OTHER_LINES = ["GET /mutate HTTP/1.1", "post /mutate HTTP/1.1", "POST /healthz HTTP/1.1", "POST //mutate HTTP/1.1"]
OTHER_LINES += ["POST /mutate HTTP/1.0", "PUT /validate HTTP/1.1"]


@settings(max_examples=500, deadline=None)
@given(
    line=st.one_of(st.sampled_from(REQUEST_LINES), st.sampled_from(OTHER_LINES)),
    fields=st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)), max_size=4),
    usual=st.booleans(),
)
def test_whatever_is_read_here_gunicorn_reads_the_same(line: str, fields: list[tuple[str, str]], usual: bool) -> None:
    fields = [("Host", "x"), ("Content-Length", "5"), *fields] if usual else fields
    head = "\r\n".join([line, *(f"{n}: {v}" for n, v in fields)]).encode()
    read = parse_head(head)
    if read is None:
        return
    body = b"{" + b" " * max(read.length - 2, 0) + b"}" if read.length >= 2 else b"x" * read.length
    environ = gunicorn_reads(head, body)
    assert environ is not None, head
    ours = lean_http.environ_of(read, body, ("0.0.0.0", 8443), ("10.0.0.1", 5000))
    for key in {k for k in environ if k.startswith(("HTTP_", "CONTENT_"))} | set(read.headers):
        assert ours.get(key) == environ.get(key), (key, head)
    for key in ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "SERVER_PROTOCOL"):
        assert ours[key] == environ[key], (key, head)
    assert environ["lean.body"] == body


# --- through the server ---------------------------------------------------------------------


def exchange(tls: ssl.SSLSocket, request: bytes) -> tuple[int, bytes]:
    """Send one request; the status and body of its response (read by Content-Length)."""
    tls.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = tls.recv(65536)
        if not chunk:
            return 0, data  # closed without an answer
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next((int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        rest += tls.recv(65536)
    return int(lines[0].split()[1]), rest[:length]


def connect(port: int, ca: Path) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(ca))
    return context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")


def request(head: bytes, body: bytes = BODY) -> bytes:
    return head + b"\r\n\r\n" + body


REQUESTS = [
    request(API_SERVER_HEAD),
    request(API_SERVER_HEAD.replace(b"/mutate", b"/validate")),
    request(API_SERVER_HEAD.replace(b"application/json\r\n", b"text/plain\r\n")),  # 415
    request(API_SERVER_HEAD, b"{not json" + b" " * (len(BODY) - 9)),  # 400
    request(API_SERVER_HEAD.replace(b"POST", b"PUT")),  # 405, read by gunicorn
    request(API_SERVER_HEAD + b"\r\nX_Trace: 1"),  # a name with "_": gunicorn's to refuse
    request(API_SERVER_HEAD.replace(b"/mutate?timeout=10s", b"/mutate?timeout=10s&x=%20")),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with serving(tmp_path_factory.mktemp("lean")) as (port, cert_dir, _):
        yield port, cert_dir / CA_FILE


def answered_alone(port: int, ca: Path, sent: bytes) -> tuple[int, Any]:
    with connect(port, ca) as tls:
        status, body = exchange(tls, sent)
    return status, _parsed(body)


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body


@pytest.mark.parametrize("sent", REQUESTS, ids=range(len(REQUESTS)))
def test_a_request_after_another_is_answered_as_the_first_on_a_connection(server, sent: bytes) -> None:
    port, ca = server
    with connect(port, ca) as tls:
        assert exchange(tls, request(API_SERVER_HEAD))[0] == 200  # gunicorn reads the first
        status, body = exchange(tls, sent)  # this thread reads the next: lean_http, or gunicorn
    assert (status, _parsed(body)) == answered_alone(port, ca, sent)


def test_a_body_that_arrives_in_pieces_is_waited_for(server) -> None:
    port, ca = server
    sent = request(API_SERVER_HEAD)
    with connect(port, ca) as tls:
        assert exchange(tls, sent)[0] == 200
        tls.sendall(sent[: len(sent) // 2])
        time.sleep(0.2)  # the rest comes later, as on a congested link
        status, body = exchange(tls, sent[len(sent) // 2 :])
    assert status == 200 and json.loads(body)["response"]["allowed"] is True


def test_a_head_over_the_limit_is_left_to_gunicorn(server) -> None:
    port, ca = server
    sent = request(API_SERVER_HEAD + b"\r\nX-Padding: " + b"p" * (lean_http.HEAD_LIMIT + 10))
    with connect(port, ca) as tls:
        assert exchange(tls, request(API_SERVER_HEAD))[0] == 200
        after = exchange(tls, sent)
    assert after[0] == answered_alone(port, ca, sent)[0]


def test_dates_are_rfc_9110s_in_any_locale() -> None:
    assert lean_http.http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT"  # RFC 9110's example


def test_a_failure_of_the_app_itself_is_the_logged_json_500_and_the_connection_ends() -> None:
    try:
        raise RuntimeError("a bug, with a secret in its message")
    except RuntimeError:
        answer = lean_http.failure()
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 500 Internal Server Error"
    assert b"Connection: close" in lines and f"Content-Length: {len(body)}".encode() in lines
    assert json.loads(body) == {"error": "internal error", "code": 500}
