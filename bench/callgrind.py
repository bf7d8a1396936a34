"""Instructions (valgrind's callgrind) an engine call costs, for this tree and an earlier commit
side by side: counts are steady where seconds on a shared machine are not.

A child process loads the policies and warms up, then makes the call N times inside one
`collections.deque(...)` of a map: callgrind counts only what runs inside it (`--toggle-collect`),
so start-up and loading drop out (the engine itself never uses a deque). The earlier
commit is exported with `git archive` into a cache directory and imported from there; the child
speaks to both APIs (the quantity parser was once an argument). `compiled_tree` is this tree's
engine compiled by mypyc, as the image runs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(tempfile.gettempdir()) / "gpu-admission-bench-trees"

CHILD = r"""
import collections, inspect, json, sys
from policies.engine import Engine
from policies.judge.ledger import Ledger
from policies.model.loader import load_texts
from policies.model.policyset import PolicySet
from policies.quantity import parse_quantity

spec = json.load(open(sys.argv[1]))
calls = int(sys.argv[2])
try:
    parameters = inspect.signature(load_texts).parameters
except ValueError:  # compiled (mypyc): no signature to read, and the current API
    parameters = {}
extra = (parse_quantity,) if "parse_quantity" in parameters else ()


def load(texts):
    result = load_texts([tuple(t) for t in texts], *extra)
    assert not result.problems, result.problems[:3]
    return result


pod = spec.get("pod")
if spec["what"] == "load":
    texts = spec["texts"]
    load(texts[:5])
    call = lambda _: load(texts)
else:
    engine = Engine(PolicySet(load(spec["texts"]).policies), *extra)
    mutated = engine.mutate(pod).object
    ledger = Ledger()
    engine.validate(mutated, ledger), engine.mutate(pod)
    if spec["what"] == "mutate":
        call = lambda _: engine.mutate(pod)
    else:
        call = lambda _: engine.validate(mutated, ledger)
collections.deque(map(call, range(calls)), maxlen=0)  # the only part counted
"""


def available() -> bool:
    return shutil.which("valgrind") is not None


def tree(ref: str) -> Path:
    """The files of commit `ref`, exported once into the cache ("" or "HEAD+": this work tree)."""
    if ref in ("", "."):
        return ROOT
    sha = subprocess.run(["git", "rev-parse", ref], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    where = CACHE / sha
    if not (where / "policies").is_dir():
        where.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def compiled_tree(root: Path = ROOT) -> Path:
    """A tree's engine (this work tree's by default) compiled by mypyc, as the image ships it
    (tools/compile_engine.py)."""
    sys.path.insert(0, str(ROOT))
    from tools.compile_engine import build

    return build(root)


def collected(source: Path, command: list[str], toggle: bool = False, exits: tuple[int, ...] = (0,)) -> int:
    """Instructions `command` runs with `source` first on the path (`toggle`: only those inside
    a `collections.deque(...)`, as CHILD counts its calls; `exits`: the exit codes that are fine)."""
    with tempfile.TemporaryDirectory() as out:
        options = ["--toggle-collect=deque_extend"] if toggle else []
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", *options, f"--callgrind-out-file={out}/cg", *command],
            cwd=source,
            env={**os.environ, "PYTHONPATH": str(source)},
            capture_output=True,
            text=True,
        )
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode not in exits or found is None:
        raise RuntimeError(f"callgrind run failed in {source}: {run.stderr[-2000:]}")
    return int(found.group(1))


def counted(source: Path, child: str, spec: object, calls: int, *arguments: str) -> float:
    """Instructions one call costs in `child`, a script that reads `spec` from the JSON file its
    first argument names and makes its call as many times as its second says, counting them as
    CHILD does; `arguments` follow those two."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(spec, file)
    try:
        return collected(source, [sys.executable, "-c", child, file.name, str(calls), *arguments], toggle=True) / calls
    finally:
        os.unlink(file.name)


def per_call(source: Path, what: str, texts: list[tuple[str, str]], pod: object = None, calls: int = 100) -> float:
    """Instructions one call of `what` (mutate, validate or load) costs under `texts`."""
    return counted(source, CHILD, {"what": what, "texts": texts, "pod": pod}, calls)
