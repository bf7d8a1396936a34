"""Server processes the tests start: a free port, and waiting until one answers."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from certs.cert_files import CA_FILE
from tests.support.server_harness import Client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(
    port: int, ca: Path, process: subprocess.Popen, deadline: float = 60.0, certificate: tuple[Path, Path] | None = None
) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if process.poll() is not None:
            raise AssertionError(f"serve exited with {process.returncode}: {process.stderr.read().decode()[-2000:]}")
        try:
            if ca.exists() and Client(port, ca, certificate=certificate).request("GET", "/readyz")[0] == 200:
                return
        except (OSError, ssl.SSLError):
            pass
        time.sleep(0.1)
    raise AssertionError("serve did not become ready")


SERVICE_NAME = "gpu-admission.gpu-admission.svc"  # the Service a serving certificate names


@contextlib.contextmanager
def serving(tmp_path: Path, *flags: str) -> Iterator[tuple[int, Path, subprocess.Popen]]:
    """`gpu-admission serve` with `flags`, ready on a free port; killed on the way out."""
    port = free_port()
    cert_dir = tmp_path / "certs"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "webhook.cli", "serve", "--bind", f"127.0.0.1:{port}", "--cert-dir", str(cert_dir)]
        + list(flags),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_ready(port, cert_dir / CA_FILE, process)
        yield port, cert_dir, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
