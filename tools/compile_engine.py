"""The engine compiled: policies/ as C extension modules, built by mypyc from the same source.

policies/ is typed Python that mypy checks strictly; mypyc (part of mypy) compiles such modules
to C, where a call, an attribute or a loop costs a fraction of the interpreter's. The image is
built so (`GPU_ADMISSION_COMPILE=1 pip install .`, in the Dockerfile's build stage, through
setup.py); an uncompiled install (`pip install -e .`, the tests, a developer's tree) runs the
same .py files. Nothing is written twice: the source is the only text, and the compiled modules
are built from it, never kept in the repository.

    python -m tools.compile_engine        # builds (or finds) the compiled tree, prints its folder

A built tree is cached outside the repository by what made it (each source's text, mypy's and
Python's versions), like the control plane's binaries: tests and benches that put it first on
PYTHONPATH import the compiled engine, and a change to any source builds a new one.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gpu-admission" / "compiled-engine"

# Modules left as Python, and why. A compiled module calls these as it would any Python module.
INTERPRETED = {
    # It makes a Loader class on PyYAML's C loader at import: mypyc compiles no class made at run time.
    "policies/model/yamldoc.py": "a class made at run time",
}

# The child process build() runs in its copy of the sources: setup.py's own extensions, built in
# place (the C of each module in a file of its own; `--parallel` builds the modules' small shims
# side by side, the shared library that holds their code in one compile).
_BUILD = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])  # the project, for tools.compile_engine
from setuptools import setup
from tools.compile_engine import extensions
setup(
    name="gpu-admission-engine",
    ext_modules=extensions(Path.cwd()),
    script_args=["build_ext", "--inplace", "--parallel", sys.argv[1]],
)
"""


def sources(root: Path = ROOT) -> list[str]:
    """Every module of policies/ that is compiled, relative to `root`, in a stable order."""
    found = sorted(p.relative_to(root).as_posix() for p in (root / "policies").rglob("*.py"))
    return [f for f in found if f not in INTERPRETED]


def extensions(root: Path = ROOT) -> list[object]:
    """setup.py's ext_modules: the compiled engine (mypyc must be importable: mypy is a build need)."""
    from mypyc.build import mypycify  # only when compiling: an ordinary install never needs mypy

    previous = Path.cwd()
    os.chdir(root)  # mypycify takes paths relative to the project, as setup.py runs
    try:
        return list(mypycify(sources(root), opt_level="3", multi_file=True))
    finally:
        os.chdir(previous)


def _key(root: Path) -> str:
    import mypy.version

    digest = hashlib.sha256(f"{mypy.version.__version__} {platform.python_version()} {sys.platform}".encode())
    for name in sorted(p.relative_to(root).as_posix() for p in (root / "policies").rglob("*")):
        path = root / name
        if path.is_file() and "__pycache__" not in name and not name.endswith(".so"):
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build(root: Path = ROOT) -> Path:
    """A folder holding policies/ compiled from `root`'s source (built once per source): put it
    first on PYTHONPATH to import the compiled engine."""
    where = CACHE / _key(root)
    if (where / "complete").exists():
        return where
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=CACHE, prefix="building-"))
    try:
        shutil.copytree(root / "policies", work / "policies", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        shutil.copy(root / "pyproject.toml", work / "pyproject.toml")  # mypy's settings, as in CI
        cores = str(max(1, len(os.sched_getaffinity(0))))
        run = subprocess.run([sys.executable, "-c", _BUILD, cores, str(ROOT)], cwd=work, capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError(f"mypyc could not compile the engine:\n{(run.stdout + run.stderr)[-4000:]}")
        shutil.rmtree(work / "build", ignore_errors=True)  # the C sources and objects: the .so files are what runs
        (work / "complete").write_text("compiled by tools/compile_engine.py\n")
        try:
            work.rename(where)
        except OSError:  # another build finished first: use it
            shutil.rmtree(work, ignore_errors=True)
        return where
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    print(build())


if __name__ == "__main__":
    main()
