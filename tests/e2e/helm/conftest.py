"""This lane's control plane, the newest release's, its own: the chart is installed into it with a
real `helm` (tests.e2e.controlplane.helm), where the kustomize installation of the other e2e
modules would hold every name the chart renders. Started when the lane's first test needs it and
stopped after its last."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.controlplane.build import KUBERNETES_VERSION, BuildError
from tests.e2e.controlplane.helm import ensure_helm
from tests.e2e.lanes import lane

control_plane, kubectl, installation = lane(KUBERNETES_VERSION)


@pytest.fixture(scope="package")
def helm_binary() -> Path:
    try:
        return ensure_helm()
    except BuildError as error:
        pytest.fail(f"helm cannot be built here: {error}", pytrace=False)


@pytest.fixture(scope="package")
def helm(helm_binary: Path, control_plane, tmp_path_factory: pytest.TempPathFactory):
    """Real helm against this lane's plane, its caches and config in a folder of its own."""
    from tests.e2e.kubectl import Kubectl

    home = tmp_path_factory.mktemp("helm-home")

    class Helm(Kubectl):
        def env(self) -> dict[str, str]:
            own = {f"HELM_{kind}_HOME": str(home / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}
            return super().env() | own

    return Helm(helm_binary, control_plane.kubeconfig)
