"""The engine as the image ships it: compiled by mypyc from the same source (tools/compile_engine.py).

mypyc enforces at run time the types mypy checks, and some Python it compiles differently (no
class made at run time, no patching of a compiled function). So the quick tests of the engine,
its edges and the server (every review answered with a 200) run again against the compiled
modules: every answer the source gives, the compiled engine gives, and no requester's field
reaches a type check the source does not make.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tools.compile_engine import ROOT, build

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def compiled() -> str:
    try:
        return str(build())
    except RuntimeError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def compiled_first(compiled: str) -> dict[str, str]:
    """The environment of a child process that imports the compiled engine before the source."""
    return {**os.environ, "PYTHONPATH": f"{compiled}{os.pathsep}{ROOT}"}


def test_the_compiled_engine_is_what_a_compiled_install_imports(compiled, compiled_first):
    child = subprocess.run(
        [sys.executable, "-P", "-c", "import policies.engine as e; print(e.COMPILED, e.__file__)"],
        env=compiled_first,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.startswith(f"True {compiled}"), child.stdout


# The quick tests of the engine, its edges and the server, and the engine's laws that hypothesis
# drives at length (the charge covers what a pod can get; schema and loader agree; every pod the
# engine acts on reaches the webhook; no history overruns a budget): not the slow tests that
# start replicas and control planes, where the engine is a small part of what runs.
SELECTIONS = {
    "quick": ["-m", "not slow", "tests/engine", "tests/edge", "tests/server"],
    "laws": [
        "-m",
        "slow",
        "--ignore=tests/engine/test_compiled_engine.py",
        "tests/engine",
        "tests/edge/test_quota_budget_law.py",
    ],
}


@pytest.mark.parametrize("selection", SELECTIONS.values(), ids=SELECTIONS.keys())
def test_the_engine_edge_and_server_suites_pass_against_the_compiled_engine(compiled_first, selection):
    # -P and append: neither the working folder nor the tests' root may come before the compiled
    # tree on the path (tests/conftest.py checks that the engine it imports is the compiled one).
    child = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "-o",
            "pythonpath=",
            "--import-mode=append",
            *selection,
        ],
        env={**compiled_first, "GPU_ADMISSION_EXPECT_COMPILED": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-2000:]  # 5: none collected
