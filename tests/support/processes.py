"""Server processes the tests start: a free port, and waiting until one answers."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from pathlib import Path

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
