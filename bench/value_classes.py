"""What each value-class style costs, as the engine runs it: interpreted, and compiled by mypyc
(as the image runs policies/), side by side in one run. The architecture page's rule for value
classes quotes these figures.

For each style, one module defines a three-field value class and a loop that makes one and reads
its fields (what a review does with a pod's facts), and another that only reads fields of an
existing one (what is done with what was loaded once). The module is timed as Python, then
compiled by mypyc in a temporary folder and timed again.

    PYTHONPATH=. python bench/value_classes.py [--loops 300000] [--runs 5]
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import textwrap
import timeit
from pathlib import Path

STYLES = {
    "NamedTuple": """
        class Value(NamedTuple):
            name: str
            amount: int
            share: float
    """,
    "frozen dataclass, slots": """
        @dataclass(frozen=True, slots=True)
        class Value:
            name: str
            amount: int
            share: float
    """,
    "frozen dataclass": """
        @dataclass(frozen=True)
        class Value:
            name: str
            amount: int
            share: float
    """,
    "plain class, __slots__": """
        class Value:
            __slots__ = ("name", "amount", "share")

            def __init__(self, name: str, amount: int, share: float) -> None:
                self.name = name
                self.amount = amount
                self.share = share
    """,
}

LOOPS = """
    def make_and_read(n: int) -> float:
        total = 0.0
        for i in range(n):
            value = Value("a", i, 0.5)
            total += value.amount + value.share + len(value.name)
        return total


    def read(n: int) -> float:
        value = Value("a", 1, 0.5)
        total = 0.0
        for _ in range(n):
            total += value.amount + value.share + len(value.name)
        return total
"""

HEADER = "from __future__ import annotations\n\nfrom dataclasses import dataclass\nfrom typing import NamedTuple\n"


def module_text(style: str) -> str:
    return HEADER + textwrap.dedent(STYLES[style]) + textwrap.dedent(LOOPS)


def module_name(index: int) -> str:
    return f"value_style_{index}"


def write_modules(folder: Path) -> list[str]:
    names = []
    for index, style in enumerate(STYLES):
        name = module_name(index)
        (folder / f"{name}.py").write_text(module_text(style))
        names.append(name)
    return names


def compile_modules(folder: Path, names: list[str]) -> None:
    """mypyc, as tools/compile_engine.py builds the engine (opt level 3), in `folder`."""
    setup = (
        "from setuptools import setup\n"
        "from mypyc.build import mypycify\n"
        f"setup(name='value-styles', ext_modules=mypycify({[f'{n}.py' for n in names]!r}, opt_level='3'),\n"
        "      script_args=['build_ext', '--inplace'])\n"
    )
    (folder / "setup_styles.py").write_text(setup)
    done = subprocess.run([sys.executable, "setup_styles.py"], cwd=folder, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mypyc could not build the styles:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    for name in names:  # the .py beside the .so would be found first by nothing, but say so plainly
        (folder / f"{name}.py").rename(folder / f"{name}.py.source")


def best_ns(function: object, loops: int, runs: int) -> float:
    timer = timeit.Timer(lambda: function(loops))  # type: ignore[operator]
    return min(timer.repeat(runs, 1)) / loops * 1e9


def measure(folder: Path, names: list[str], loops: int, runs: int) -> dict[str, tuple[float, float]]:
    sys.path.insert(0, str(folder))
    try:
        found = {}
        for style, name in zip(STYLES, names, strict=True):
            module = importlib.import_module(name)
            found[style] = (best_ns(module.make_and_read, loops, runs), best_ns(module.read, loops, runs))
        return found
    finally:
        sys.path.remove(str(folder))
        for name in names:
            sys.modules.pop(name, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="value-styles-") as interpreted,
        tempfile.TemporaryDirectory(prefix="value-styles-compiled-") as compiled,
    ):
        names = write_modules(Path(interpreted))
        write_modules(Path(compiled))
        compile_modules(Path(compiled), names)
        python = measure(Path(interpreted), names, args.loops, args.runs)
        native = measure(Path(compiled), names, args.loops, args.runs)
    base_python = python["plain class, __slots__"][0]
    base_native = native["plain class, __slots__"][0]
    print(f"ns a value (best of {args.runs} runs of {args.loops}); ratio to the plain slotted class")
    heading = f"{'make+read':>10s} {'ratio':>6s} {'read':>7s} | {'compiled':>9s} {'ratio':>6s} {'read':>7s}"
    print(f"  {'style':26s} {heading}")
    for style in STYLES:
        (make, read), (make_c, read_c) = python[style], native[style]
        print(
            f"  {style:26s} {make:10.1f} {make / base_python:5.2f}x {read:7.1f} | "
            f"{make_c:9.1f} {make_c / base_native:5.2f}x {read_c:7.1f}"
        )
    print(f"  (python {sys.version.split()[0]}, mypyc from mypy {_mypy_version()}, pid {os.getpid()})")


def _mypy_version() -> str:
    from importlib.metadata import version

    return version("mypy")


if __name__ == "__main__":
    main()
