"""Build (or reuse) the control plane's binaries: `python -m tests.e2e.controlplane.build
[--version vX.Y.Z]`.

Two lanes, each a Go module of its own (`v1.<minor>/go.mod`): the newest release the Go module
proxy serves that builds here, which the whole e2e suite runs against, and the oldest release we
support, which the compatibility lane (tests/e2e/oldest) installs into. The binaries are cached
outside the repository, under $GPU_ADMISSION_E2E_CACHE (default ~/.cache/gpu-admission-e2e), in a
folder named by the Kubernetes release and a digest of its go.mod and go.sum, so only the first run
on a machine pays the build. Progress goes to stderr as it builds. Go is test infrastructure
only: nothing here is part of the product.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.controlplane import gomod

#: The newest release the Go module proxy serves (v1.36.3 is the newest 1.36; 1.37 builds here).
KUBERNETES_VERSION = "v1.37.2"
#: The oldest release we support: the newest 1.34 patch the proxy serves (docs/development.md).
OLDEST_VERSION = "v1.34.4"
VERSIONS = (KUBERNETES_VERSION, OLDEST_VERSION)

HERE = Path(__file__).resolve().parent


def module_dir(version: str = KUBERNETES_VERSION) -> Path:
    """The Go module of a lane: v1.37.2 -> v1.37/ (a lane moves to a newer patch in place)."""
    return HERE / ".".join(version.split(".")[:2])


BINARIES = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "etcd": "go.etcd.io/etcd/server/v3",
}


class BuildError(RuntimeError):
    """The control plane cannot be built here; the message says why (never a silent skip)."""


def say(message: str) -> None:
    # The process's own stderr, not pytest's capture: a first build's progress is seen as it goes.
    print(f"[e2e control plane] {message}", file=sys.__stderr__, flush=True)


def cache_root() -> Path:
    configured = os.environ.get("GPU_ADMISSION_E2E_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "gpu-admission-e2e"


def _go(*args: str, version: str = KUBERNETES_VERSION, capture: bool = True) -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the e2e suite builds Kubernetes from Go modules: it needs Go >= 1.24 on PATH (no 'go')")
    done = subprocess.run(
        [go, *args],
        cwd=module_dir(version),
        capture_output=capture,
        text=True,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    if done.returncode != 0:
        raise BuildError(f"go {' '.join(args)} failed:\n{(done.stderr or '')[-4000:]}")
    return done.stdout or ""


def kubernetes_go_mod(version: str = KUBERNETES_VERSION) -> str:
    """k8s.io/kubernetes' own go.mod at a release, from the module proxy (or the module cache)."""
    info = json.loads(_go("mod", "download", "-json", f"k8s.io/kubernetes@{version}", version=version))
    if info.get("Error"):
        raise BuildError(f"the Go module proxy refused k8s.io/kubernetes@{version}: {info['Error']}")
    return Path(info["GoMod"]).read_text()


def generate(version: str = KUBERNETES_VERSION) -> None:
    """Write go.mod from the release's go.mod and let `go mod tidy` resolve the graph and go.sum."""
    say(f"writing go.mod for Kubernetes {version} and resolving its module graph (go mod tidy)")
    module_dir(version).mkdir(exist_ok=True)
    (module_dir(version) / "go.mod").write_text(gomod.render(version, kubernetes_go_mod(version)))
    _go("mod", "tidy", version=version)


def stamp(version: str = KUBERNETES_VERSION) -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((module_dir(version) / name).read_bytes())
    return digest.hexdigest()[:16]


def bin_dir(version: str = KUBERNETES_VERSION) -> Path:
    return cache_root() / f"kubernetes-{version}-{stamp(version)}" / "bin"


def _ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    base = "k8s.io/component-base/version"
    return " ".join(
        [
            "-s",
            "-w",
            f"-X {base}.gitVersion={version}",
            f"-X {base}.gitMajor={major}",
            f"-X {base}.gitMinor={minor}",
            f"-X {base}.gitTreeState=clean",
            f"-X {base}.buildDate=1970-01-01T00:00:00Z",
        ]
    )


def _build_one(name: str, package: str, target: Path, version: str) -> None:
    """`go build -v` lists each package as it compiles: a count of them is the progress line."""
    go = shutil.which("go")
    assert go is not None
    started = time.monotonic()
    partial = target.with_name(target.name + ".partial")
    command = [go, "build", "-v", "-trimpath", "-ldflags", _ldflags(version), "-o", str(partial), package]
    process = subprocess.Popen(
        command, cwd=module_dir(version), stderr=subprocess.PIPE, text=True, env={**os.environ, "GOFLAGS": "-mod=mod"}
    )
    assert process.stderr is not None
    tail: list[str] = []
    last_said = started
    for compiled, line in enumerate(process.stderr, start=1):
        tail = [*tail[-40:], line.rstrip()]
        if time.monotonic() - last_said >= 15:
            last_said = time.monotonic()
            say(f"{name}: {compiled} packages compiled, {last_said - started:.0f} s")
    if process.wait() != 0:
        raise BuildError(f"building {name} ({package}) failed:\n" + "\n".join(tail))
    partial.replace(target)
    say(f"{name}: built in {time.monotonic() - started:.0f} s, {target.stat().st_size / 2**20:.0f} MiB")


def ensure_binaries(version: str = KUBERNETES_VERSION) -> Path:
    """The folder holding all five binaries of a lane, building what is missing; raises
    BuildError with the reason."""
    if not (module_dir(version) / "go.mod").exists():
        generate(version)
    target = bin_dir(version)
    missing = [name for name in BINARIES if not (target / name).exists()]
    if not missing:
        return target
    target.mkdir(parents=True, exist_ok=True)
    say(f"building {', '.join(missing)} for Kubernetes {version} into {target} (first run only)")
    started = time.monotonic()
    for name in missing:
        _build_one(name, BINARIES[name], target / name, version)
    total = sum((target / name).stat().st_size for name in BINARIES)
    say(f"control plane ready in {time.monotonic() - started:.0f} s, {total / 2**20:.0f} MiB in {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regenerate", action="store_true", help="write go.mod/go.sum anew from the pinned release")
    parser.add_argument("--version", choices=VERSIONS, default=KUBERNETES_VERSION, help="the lane to build")
    args = parser.parse_args(argv)
    try:
        if args.regenerate:
            generate(args.version)
        print(ensure_binaries(args.version))
    except BuildError as error:
        say(str(error))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
