"""The runtime's house rules (#61), read from its source: no class over 16 methods; no class takes
another's lock (a lock is taken only in its owner's methods, `with self....`); no two runtime
modules (policies/, webhook/, certs/) name different things alike, but a watch of what the engine
models (webhook/cluster/watches/claims.py beside policies/gpu/claims.py)."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ("policies", "webhook", "certs")
MOST_METHODS = 16
WATCHES = "webhook/cluster/watches"


def runtime_modules() -> list[Path]:
    return [path for root in RUNTIME for path in sorted((ROOT / root).rglob("*.py"))]


@functools.cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def test_no_class_has_more_than_sixteen_methods():
    found = {}
    for path in runtime_modules():
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ClassDef):
                methods = [b for b in node.body if isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > MOST_METHODS:
                    found[f"{path.relative_to(ROOT)}:{node.name}"] = len(methods)
    assert found == {}


def test_a_lock_is_taken_only_by_its_owner():
    """`with self._lock`, `with self._moved` (a condition on it): never `with other.lock`, nor a
    lock another object hands out (`with escrow.writing(key)` is the owner's own method)."""
    found = []
    for path in runtime_modules():
        for node in ast.walk(parsed(path)):
            if not isinstance(node, ast.With):
                continue
            for item in node.items:
                taken = item.context_expr
                named = isinstance(taken, ast.Attribute) and "lock" in taken.attr.lower()
                if named and not (isinstance(taken.value, ast.Name) and taken.value.id == "self"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: with {ast.unparse(taken)}")
    assert found == []


def test_no_two_runtime_modules_share_a_name_but_a_watch_of_what_the_engine_models():
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in runtime_modules():
        if path.name not in ("__init__.py", "__main__.py"):
            by_name[path.name].append(str(path.parent.relative_to(ROOT)))
    shared = {
        name: folders
        for name, folders in by_name.items()
        if len(folders) > 1 and not (len(folders) == 2 and WATCHES in folders and folders[0].startswith("policies/"))
    }
    assert shared == {}
