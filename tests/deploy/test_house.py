"""The test suite's own house rules (#43): tests share helpers from tests/support alone; no test
module imports another, nor conftest, and benchmarks and tools reach the suite only there too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def shared_wrongly(module: str) -> bool:
    """A test module or conftest, imported as if it were a helper."""
    parts = module.split(".")
    return parts[0] == "tests" and (
        any(part.startswith("test_") or part == "conftest" for part in parts[1:]) and "support" not in parts
    )


def test_tests_benchmarks_and_tools_share_test_helpers_only_from_tests_support():
    found = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if shared_wrongly(m))
        for folder in ("tests", "bench", "tools")
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    assert {path: modules for path, modules in found.items() if modules} == {}


def test_the_helper_modules_live_in_tests_support_not_beside_the_tests():
    loose = sorted(p.name for p in (ROOT / "tests").glob("*.py") if p.name not in ("__init__.py", "conftest.py"))
    assert loose == [], "shared helpers go in tests/support"
