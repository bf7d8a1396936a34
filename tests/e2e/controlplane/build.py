"""Build (or reuse) the control plane's binaries: `python -m tests.e2e.controlplane.build`.

The binaries are cached outside the repository, under $GPU_ADMISSION_E2E_CACHE (default
~/.cache/gpu-admission-e2e), in a folder named by the Kubernetes release and a digest of go.mod and
go.sum, so only the first run on a machine pays the build. Progress goes to stderr as it builds.
Go is test infrastructure only: nothing here is part of the product.
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

#: The pinned release: the newest 1.34 patch the Go module proxy serves (README: how to move to 1.35).
KUBERNETES_VERSION = "v1.34.4"

MODULE_DIR = Path(__file__).resolve().parent
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


def _go(*args: str, capture: bool = True) -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the e2e suite builds Kubernetes from Go modules: it needs Go >= 1.24 on PATH (no 'go')")
    done = subprocess.run(
        [go, *args], cwd=MODULE_DIR, capture_output=capture, text=True, env={**os.environ, "GOFLAGS": "-mod=mod"}
    )
    if done.returncode != 0:
        raise BuildError(f"go {' '.join(args)} failed:\n{(done.stderr or '')[-4000:]}")
    return done.stdout or ""


def kubernetes_go_mod(version: str = KUBERNETES_VERSION) -> str:
    """k8s.io/kubernetes' own go.mod at a release, from the module proxy (or the module cache)."""
    info = json.loads(_go("mod", "download", "-json", f"k8s.io/kubernetes@{version}"))
    if info.get("Error"):
        raise BuildError(f"the Go module proxy refused k8s.io/kubernetes@{version}: {info['Error']}")
    return Path(info["GoMod"]).read_text()


def generate(version: str = KUBERNETES_VERSION) -> None:
    """Write go.mod from the release's go.mod and let `go mod tidy` resolve the graph and go.sum."""
    say(f"writing go.mod for Kubernetes {version} and resolving its module graph (go mod tidy)")
    (MODULE_DIR / "go.mod").write_text(gomod.render(version, kubernetes_go_mod(version)))
    _go("mod", "tidy")


def stamp() -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((MODULE_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def bin_dir() -> Path:
    return cache_root() / f"kubernetes-{KUBERNETES_VERSION}-{stamp()}" / "bin"


def _ldflags() -> str:
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    base = "k8s.io/component-base/version"
    return " ".join(
        [
            "-s",
            "-w",
            f"-X {base}.gitVersion={KUBERNETES_VERSION}",
            f"-X {base}.gitMajor={major}",
            f"-X {base}.gitMinor={minor}",
            f"-X {base}.gitTreeState=clean",
            f"-X {base}.buildDate=1970-01-01T00:00:00Z",
        ]
    )


def _build_one(name: str, package: str, target: Path) -> None:
    """`go build -v` lists each package as it compiles: a count of them is the progress line."""
    go = shutil.which("go")
    assert go is not None
    started = time.monotonic()
    partial = target.with_name(target.name + ".partial")
    command = [go, "build", "-v", "-trimpath", "-ldflags", _ldflags(), "-o", str(partial), package]
    process = subprocess.Popen(
        command, cwd=MODULE_DIR, stderr=subprocess.PIPE, text=True, env={**os.environ, "GOFLAGS": "-mod=mod"}
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


def ensure_binaries() -> Path:
    """The folder holding all five binaries, building what is missing; raises BuildError with the reason."""
    if not (MODULE_DIR / "go.mod").exists():
        generate()
    target = bin_dir()
    missing = [name for name in BINARIES if not (target / name).exists()]
    if not missing:
        return target
    target.mkdir(parents=True, exist_ok=True)
    say(f"building {', '.join(missing)} for Kubernetes {KUBERNETES_VERSION} into {target} (first run only)")
    started = time.monotonic()
    for name in missing:
        _build_one(name, BINARIES[name], target / name)
    total = sum((target / name).stat().st_size for name in BINARIES)
    say(f"control plane ready in {time.monotonic() - started:.0f} s, {total / 2**20:.0f} MiB in {target}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regenerate", action="store_true", help="write go.mod/go.sum anew from the pinned release")
    args = parser.parse_args(argv)
    try:
        if args.regenerate:
            generate()
        print(ensure_binaries())
    except BuildError as error:
        say(str(error))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
