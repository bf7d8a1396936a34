"""`gpu-admission serve` as shipped: gunicorn, TLS from files, keep-alive, certificate reload, SIGTERM."""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509

from certs.cert_files import CA_FILE, generate
from tests.support.builders import child_pythonpath
from tests.support.processes import free_port, serving, wait_ready
from tests.support.reviews import gpu_pod, review, send_chunked
from tests.support.server_harness import Client

pytestmark = pytest.mark.slow


def wait_for_line(process: subprocess.Popen, text: str, deadline: float = 20.0) -> None:
    """Returns once the server's stderr holds `text` (read as it is written, from the pipe itself:
    a buffered reader could hold the line while select says there is nothing left)."""
    end, seen = time.monotonic() + deadline, b""
    fd = process.stderr.fileno()
    while text.encode() not in seen and (left := end - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break  # the stream ended
            seen += chunk
    assert text.encode() in seen, f"the server never logged {text!r}: {seen.decode()[-2000:]}"


@pytest.fixture
def served(tmp_path):
    with serving(tmp_path) as running:
        yield running


def served_serial(port: int, ca: Path) -> int:
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_serve_with_no_policies_makes_dev_certificates_and_answers_reviews(served):
    port, cert_dir, _ = served
    client = Client(port, cert_dir / CA_FILE)
    status, body = client.review("/mutate", review(gpu_pod({"team": "a"}), namespace="ml"))
    assert status == 200 and body["response"]["patchType"] == "JSONPatch"
    status, body = client.review("/validate", review(gpu_pod({"team": "a"}), namespace="ml", uid="two"))
    assert status == 200 and body["response"]["uid"] == "two"  # the same keep-alive connection
    assert oct((cert_dir / "tls.key").stat().st_mode & 0o777) == "0o600"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls_below_1_2_is_refused(served):
    port, cert_dir, _ = served
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(str(cert_dir / CA_FILE))
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.minimum_version = ssl.TLSVersion.TLSv1
    with (
        pytest.raises((ssl.SSLError, ConnectionResetError)),
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
    ):
        context.wrap_socket(raw, server_hostname="localhost")


def test_renewed_certificate_files_are_served_without_a_restart(served):
    port, cert_dir, process = served
    before = served_serial(port, cert_dir / CA_FILE)
    generate(cert_dir, "gpu-admission", "gpu-admission", ["localhost"], ["127.0.0.1"])
    after = served_serial(port, cert_dir / CA_FILE)
    assert after != before and process.poll() is None
    assert Client(port, cert_dir / CA_FILE).request("GET", "/healthz")[0] == 200


def test_sigterm_shuts_down_gracefully(served):
    port, cert_dir, process = served
    client = Client(port, cert_dir / CA_FILE)
    assert client.request("GET", "/healthz")[0] == 200  # an idle keep-alive connection stays open
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0


def test_metrics_count_every_review_and_show_the_policy_set_the_master_loaded(served):
    port, cert_dir, _ = served
    ca = cert_dir / CA_FILE
    for i in range(12):  # a new connection each time
        client = Client(port, ca)
        assert client.review("/validate", review(gpu_pod({"team": "a"}), namespace="ml", uid=f"m{i}"))[0] == 200
        client.close()
    _, text = Client(port, ca).request("GET", "/metrics")
    counted = sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("gpu_admission_reviews_total{") and 'endpoint="validate"' in line
    )
    assert counted == 12
    assert "gpu_admission_policy_generation 1.0" in text


def test_a_review_in_flight_when_sigterm_arrives_is_answered_before_the_server_exits(served):
    """Half a review is sent, then SIGTERM, then the rest: the answer still comes, whole."""
    port, cert_dir, process = served
    body = json.dumps(review(gpu_pod({"team": "a"}), namespace="ml", uid="in-flight")).encode()
    head = (
        f"POST /mutate?timeout=5s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    context = ssl.create_default_context(cafile=str(cert_dir / CA_FILE))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(head + body[: len(body) // 2])  # the handshake is done: the worker holds it
        process.send_signal(signal.SIGTERM)
        wait_for_line(process, "stopping: no new connections")
        tls.sendall(body[len(body) // 2 :])
        response = http.client.HTTPResponse(tls)
        response.begin()
        answer = json.loads(response.read())
    assert response.status == 200 and answer["response"]["uid"] == "in-flight"
    assert answer["response"]["patchType"] == "JSONPatch"
    assert process.wait(30) == 0


def _raw_request(path: str, body: bytes) -> bytes:
    head = f"POST {path}?timeout=5s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class _SharedStream:
    """Hands http.client one buffered reader for several responses on the same connection
    (a response closes its reader once read; this one stays open)."""

    def __init__(self, stream):
        self.stream = stream

    def makefile(self, mode):
        return self

    def __getattr__(self, name):
        return getattr(self.stream, name)

    def close(self):
        pass


def test_many_kept_alive_connections_never_hold_each_other_up(served):
    """Each connection waits for its next request on a thread of its own; twenty waiting ones
    (more than a gthread pool's threads) leave a new connection and the first one answered."""
    port, cert_dir, _ = served
    ca = cert_dir / CA_FILE
    clients = [Client(port, ca) for _ in range(20)]
    for i, client in enumerate(clients):
        assert client.request("GET", "/healthz")[0] == 200, i
    assert Client(port, ca).review("/mutate", review(gpu_pod({"team": "a"}), namespace="ml"))[0] == 200
    assert clients[0].review("/validate", review(gpu_pod({"team": "a"}), namespace="ml"))[0] == 200
    for client in clients:
        client.close()


def test_requests_sent_back_to_back_on_one_connection_are_all_answered(served):
    """The second request arrives with the first and is read ahead: the worker must not wait on
    the socket for it (it would wait out the keep-alive)."""
    port, cert_dir, _ = served
    bodies = [json.dumps(review(gpu_pod({"team": "a"}), namespace="ml", uid=f"r{i}")).encode() for i in range(3)]
    context = ssl.create_default_context(cafile=str(cert_dir / CA_FILE))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(b"".join(_raw_request("/mutate", body) for body in bodies))
        stream = _SharedStream(tls.makefile("rb"))
        uids = []
        for _ in bodies:
            response = http.client.HTTPResponse(stream)
            response.begin()
            uids.append(json.loads(response.read())["response"]["uid"])
    assert uids == ["r0", "r1", "r2"]


def test_sigint_stops_at_once_even_with_idle_kept_alive_connections(served):
    """Connections waiting for a request are closed on a quick shutdown; the worker does not wait
    out their keep-alive (120 s, which the master would end by killing it after 20 s)."""
    port, cert_dir, process = served
    client = Client(port, cert_dir / CA_FILE)
    assert client.request("GET", "/healthz")[0] == 200
    process.send_signal(signal.SIGINT)
    assert process.wait(15) == 0


def test_a_chunked_review_is_read_whole_and_answered(served):
    port, cert_dir, _ = served
    body = json.dumps(review(gpu_pod({"team": "a"}), namespace="ml", uid="chunked")).encode()
    status, answer = send_chunked(Client(port, cert_dir / CA_FILE), "/mutate?timeout=5s", body, 100)
    assert status == 200 and answer["response"]["uid"] == "chunked" and answer["response"]["patchType"] == "JSONPatch"


def test_a_worker_restarting_after_max_requests_lets_go_of_its_idle_connections(tmp_path):
    """gunicorn's max_requests ends a worker without a signal: connections waiting on its threads
    are closed, so the worker exits and its successor serves (instead of the listener going
    unanswered until the master kills the stuck worker)."""
    port, certs = free_port(), tmp_path / "certs"
    generate(certs, "gpu-admission", "test", ["localhost"], ["127.0.0.1"])
    env = {
        **os.environ,
        "PYTHONPATH": child_pythonpath(str(Path(__file__).resolve().parents[2])),
        "GPU_ADMISSION_BIND": f"127.0.0.1:{port}",
        "GPU_ADMISSION_WORKERS": "1",
        "GPU_ADMISSION_CERT": str(certs / "tls.crt"),
        "GPU_ADMISSION_KEY": str(certs / "tls.key"),
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "gunicorn", "-c", "python:webhook.serving.gunicorn_conf", "--max-requests", "3"]
    server = subprocess.Popen([*command, "webhook.wsgi:app"], cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    try:
        wait_ready(port, certs / CA_FILE, server)  # request 1, on a connection since closed
        idle = Client(port, certs / CA_FILE)
        assert idle.request("GET", "/healthz")[0] == 200  # request 2; this connection now waits
        assert Client(port, certs / CA_FILE).request("GET", "/healthz")[0] == 200  # 3: the worker retires
        assert Client(port, certs / CA_FILE).request("GET", "/readyz")[0] == 200  # served by its successor
    finally:
        server.terminate()
        server.wait(30)


def test_metrics_on_a_port_of_their_own_leave_the_webhook_port_to_reviews(tmp_path):
    metrics = free_port()
    with serving(tmp_path, "--metrics-bind", f"127.0.0.1:{metrics}") as (port, cert_dir, _):
        client = Client(port, cert_dir / CA_FILE)
        assert client.review("/validate", review(gpu_pod({"team": "a"}), namespace="ml"))[0] == 200
        assert client.request("GET", "/metrics")[0] == 404
        plain = http.client.HTTPConnection("127.0.0.1", metrics, timeout=10)
        plain.request("GET", "/metrics")
        answer = plain.getresponse()
        text = answer.read().decode()
        assert answer.status == 200 and "gpu_admission_reviews_total{" in text
        plain.request("GET", "/readyz")
        assert plain.getresponse().status == 404


def test_a_metrics_bind_that_is_no_address_is_refused_at_start(tmp_path):
    env = {**os.environ, "GPU_ADMISSION_METRICS_BIND": "9090"}
    done = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "serve", "--cert-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "GPU_ADMISSION_METRICS_BIND='9090' is not host:port" in done.stderr
