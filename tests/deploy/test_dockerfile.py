"""The image's Dockerfile, read as text (no Docker engine here): its build stage compiles the
engine from files it copies, and checks that what it installed is the compiled engine."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
STAGES = DOCKERFILE.split("\nFROM ")[1:]  # after the header comments: the build stage, the image
BUILD_STAGE, FINAL_STAGE = STAGES[0], STAGES[-1]


def copied() -> list[str]:
    """Every source path the build stage's COPY lines name."""
    found: list[str] = []
    for line in BUILD_STAGE.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            found += line.split()[1:-1]
    return found


def test_every_path_the_build_stage_copies_is_in_the_repository():
    assert copied(), "no COPY in the build stage"
    for path in copied():
        assert (ROOT / path).exists(), path


def test_the_build_stage_copies_what_setup_py_compiles_the_engine_with():
    needed = {"setup.py", "pyproject.toml", "constraints.txt", "tools/__init__.py", "tools/compile_engine.py"}
    assert needed <= set(copied()), needed - set(copied())
    assert "policies" in copied() or "policies/" in copied()


def test_the_build_stage_compiles_the_engine_and_checks_that_it_did():
    run = re.sub(r"\\\n\s*", " ", BUILD_STAGE)
    assert "GPU_ADMISSION_COMPILE=1 pip install" in run
    assert "--no-build-isolation" in run  # mypy, setuptools and the stubs are installed just before
    assert re.search(r"pip install [^&]*'setuptools>=70\.1' mypy types-PyYAML", run)
    assert "assert e.COMPILED" in run


def test_the_image_runs_as_a_non_root_user_from_the_slim_base():
    assert len(STAGES) == 2 and BUILD_STAGE.startswith("python:3.11 AS build")
    assert FINAL_STAGE.startswith("python:3.11-slim")
    assert "USER 10001:10001" in FINAL_STAGE
