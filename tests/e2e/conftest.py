"""One control plane for the e2e package (the newest Kubernetes release, tests.e2e.controlplane.build),
gpu-admission installed into it once; both stop when the package's last test is done, so the rest
of the suite never runs beside a busy cluster. The compatibility lane (tests/e2e/oldest) starts its
own, on the oldest release we support, and stops it before this one starts.

The control plane is built from Go modules on the first run (cached by version outside the
repository) and started on loopback; if it cannot be built or started here, every e2e test fails
with the reason: CI never skips this suite silently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.controlplane.build import KUBERNETES_VERSION
from tests.e2e.lanes import lane

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)


control_plane, kubectl, installation = lane(KUBERNETES_VERSION)
