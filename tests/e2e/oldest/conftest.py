"""This lane's control plane, on the oldest release we support: its own, started when the lane's
first test needs it and stopped after its last, before the newest release's plane starts (pytest
collects this folder before the test modules beside it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.controlplane.build import OLDEST_VERSION
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.harness import Installation
from tests.e2e.kubectl import Kubectl
from tests.e2e.lanes import installed, started_plane


@pytest.fixture(scope="package")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from started_plane(OLDEST_VERSION, tmp_path_factory)


@pytest.fixture(scope="package")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    return Kubectl(control_plane.bin_dir / "kubectl", control_plane.kubeconfig)


@pytest.fixture(scope="package")
def installation(
    control_plane: ControlPlane, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installation]:
    yield from installed(control_plane, kubectl, tmp_path_factory)
