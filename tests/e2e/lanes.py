"""A lane's package fixtures: its control plane started, kubectl for it, and gpu-admission
installed into it (`lane(version)`, used by tests/e2e/conftest.py for the newest release and by
tests/e2e/oldest for the oldest we support).

A control plane that cannot be built or started fails every test of its lane with the reason:
CI never skips a lane silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.controlplane.build import BuildError, ensure_binaries
from tests.e2e.controlplane.cluster import ControlPlane, StartError
from tests.e2e.harness import Installation, install, register_nodes
from tests.e2e.kubectl import Kubectl


def started_plane(version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        binaries = ensure_binaries(version)
    except BuildError as error:
        pytest.fail(f"the e2e control plane (Kubernetes {version}) cannot be built here: {error}", pytrace=False)
    plane = ControlPlane(binaries, tmp_path_factory.mktemp(f"control-plane-{version}"), version)
    try:
        plane.start()
    except StartError as error:
        plane.stop()
        pytest.fail(f"the e2e control plane (Kubernetes {version}) did not start: {error}", pytrace=False)
    try:
        register_nodes(Kubectl(binaries / "kubectl", plane.kubeconfig))
        yield plane
    finally:
        plane.stop()


def installed(
    control_plane: ControlPlane, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installation]:
    installation = None
    try:
        installation = install(kubectl, control_plane, tmp_path_factory.mktemp("gpu-admission"))
        yield installation
    finally:
        for each in installation.replicas if installation else ():
            each.stop()
    forbidden = [line for each in installation.replicas for line in each.forbidden_lines()]
    assert not forbidden, "the API server refused gpu-admission a request (RBAC):\n" + "\n".join(forbidden[:20])


def lane(version: str) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """The fixtures `control_plane`, `kubectl` and `installation` of a lane on `version`, each
    scoped to the package whose conftest assigns them."""

    @pytest.fixture(scope="package")
    def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
        yield from started_plane(version, tmp_path_factory)

    @pytest.fixture(scope="package")
    def kubectl(control_plane: ControlPlane) -> Kubectl:
        return Kubectl(control_plane.bin_dir / "kubectl", control_plane.kubeconfig)

    @pytest.fixture(scope="package")
    def installation(
        control_plane: ControlPlane, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Installation]:
        yield from installed(control_plane, kubectl, tmp_path_factory)

    return control_plane, kubectl, installation
