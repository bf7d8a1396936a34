"""Build (or reuse) a real `helm` from its Go module, with the ldflags helm's own Makefile sets:
`python -m tests.e2e.controlplane.helm`. Cached outside the repository beside the control plane's
binaries (tests.e2e.controlplane.build.cache_root), so only the first run on a machine pays the
build (about a minute). Go is test infrastructure only: nothing here is part of the product."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.e2e.controlplane.build import BuildError, cache_root, say

#: The Helm release the e2e suite installs the chart with (#41 found its frictions on 3.19).
HELM_VERSION = "v3.19.5"
#: The Kubernetes modules that release builds against (its go.mod: k8s.io/client-go v0.34.2); its
#: Makefile writes them into the binary as the Kubernetes version it lints and renders for.
HELM_KUBERNETES = ("1", "34")
PACKAGE = "helm.sh/helm/v3/cmd/helm"


def ldflags(version: str = HELM_VERSION) -> str:
    major, minor = HELM_KUBERNETES
    flags = ["-w", "-s", f"-X helm.sh/helm/v3/internal/version.version={version}"]
    flags.append("-X helm.sh/helm/v3/internal/version.gitTreeState=clean")
    for package in ("pkg/lint/rules", "pkg/chartutil"):
        flags += [f"-X helm.sh/helm/v3/{package}.k8sVersionMajor={major}"]
        flags += [f"-X helm.sh/helm/v3/{package}.k8sVersionMinor={minor}"]
    return " ".join(flags)


def ensure_helm(version: str = HELM_VERSION) -> Path:
    """The helm binary, built on first use; raises BuildError with the reason."""
    binary = cache_root() / f"helm-{version}" / "bin" / "helm"
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise BuildError("the e2e suite builds helm from Go modules: it needs Go on PATH (no 'go')")
    say(f"building helm {version} into {binary.parent} (first run only)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as outside_any_module:
        done = subprocess.run(
            [go, "install", "-trimpath", "-ldflags", ldflags(version), f"{PACKAGE}@{version}"],
            cwd=outside_any_module,
            capture_output=True,
            text=True,
            env={**os.environ, "GOBIN": str(binary.parent), "CGO_ENABLED": "0"},
        )
    if done.returncode != 0:
        raise BuildError(f"building helm {version} failed:\n{done.stderr[-4000:]}")
    say(f"helm {version} built")
    return binary


if __name__ == "__main__":
    print(ensure_helm())
