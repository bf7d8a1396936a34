"""The engine's front door (policies/__init__): the edge (webhook/) imports the engine from there
alone (an import contract holds that), and it exports exactly what the edge imports, no name
more, as httpx's own test holds its exports. Tools and tests may reach further in."""

from __future__ import annotations

import ast
from pathlib import Path

import policies

ROOT = Path(__file__).resolve().parents[2]
# Where the front door stands, and where #61 wants it: at most 45 names, grouped by use.
MOST_NAMES = 88


def imported_by_the_edge() -> set[str]:
    found: set[str] = set()
    for path in sorted((ROOT / "webhook").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "policies":
                found.update(alias.name for alias in node.names)
    return found


def test_the_front_door_exports_what_the_edge_imports_and_nothing_more():
    assert set(policies.__all__) == imported_by_the_edge()
    assert len(policies.__all__) == len(set(policies.__all__))


def test_every_export_is_defined_and_the_door_grows_no_wider():
    assert all(hasattr(policies, name) for name in policies.__all__)
    assert len(policies.__all__) <= MOST_NAMES
