"""One control plane for the e2e package (the newest Kubernetes release, tests.e2e.controlplane.build),
gpu-admission installed into it once; both stop when the package's last test is done, so the rest
of the suite never runs beside a busy cluster. The compatibility lane (tests/e2e/oldest) starts its
own, on the oldest release we support, and stops it before this one starts.

The control plane is built from Go modules on the first run (cached by version outside the
repository) and started on loopback; if it cannot be built or started here, every e2e test fails
with the reason: CI never skips this suite silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.controlplane.build import KUBERNETES_VERSION
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.harness import Installation
from tests.e2e.kubectl import Kubectl
from tests.e2e.lanes import installed, started_plane

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="package")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from started_plane(KUBERNETES_VERSION, tmp_path_factory)


@pytest.fixture(scope="package")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    return Kubectl(control_plane.bin_dir / "kubectl", control_plane.kubeconfig)


@pytest.fixture(scope="package")
def installation(
    control_plane: ControlPlane, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installation]:
    yield from installed(control_plane, kubectl, tmp_path_factory)
