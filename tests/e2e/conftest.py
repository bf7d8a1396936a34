"""One control plane for the e2e package, gpu-admission installed into it once; both stop when the
package's last test is done, so the rest of the suite never runs beside a busy cluster.

The control plane is built from Go modules on the first run (cached by version outside the
repository) and started on loopback; if it cannot be built or started here, every e2e test fails
with the reason: CI never skips this suite silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.controlplane.build import BuildError, ensure_binaries
from tests.e2e.controlplane.cluster import ControlPlane, StartError
from tests.e2e.harness import Installation, install, register_nodes
from tests.e2e.kubectl import Kubectl

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="package")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        binaries = ensure_binaries()
    except BuildError as error:
        pytest.fail(f"the e2e control plane cannot be built here: {error}", pytrace=False)
    plane = ControlPlane(binaries, tmp_path_factory.mktemp("control-plane"))
    try:
        plane.start()
    except StartError as error:
        plane.stop()
        pytest.fail(f"the e2e control plane did not start: {error}", pytrace=False)
    try:
        register_nodes(Kubectl(binaries / "kubectl", plane.kubeconfig))
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="package")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    return Kubectl(control_plane.bin_dir / "kubectl", control_plane.kubeconfig)


@pytest.fixture(scope="package")
def installation(
    control_plane: ControlPlane, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installation]:
    installed = None
    try:
        installed = install(kubectl, control_plane, tmp_path_factory.mktemp("gpu-admission"))
        yield installed
    finally:
        for each in installed.replicas if installed else ():
            each.stop()
    forbidden = [line for each in installed.replicas for line in each.forbidden_lines()]
    assert not forbidden, "the API server refused gpu-admission a request (RBAC):\n" + "\n".join(forbidden[:20])
