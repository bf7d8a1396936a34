"""The chart README's "All values" table, from `values.yaml` itself: each value's dotted path, its
default, and the comment written above it (or beside it). A value whose comment sits on the
mapping that holds it is shown by that mapping's row; an uncommented value under an uncommented
mapping has a row of its own. The rest of the README is written by hand; the table is between
two markers and nowhere else, so it cannot drift from the values it describes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "gpu-admission"
README = CHART / "README.md"
BEGIN = "<!-- all values: written by tools/chart_readme.py from values.yaml (python -m tools.generate) -->"
END = "<!-- end of all values -->"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?P<rest>.*)$")
DEFAULT_WIDTH = 60


def _inline_comment(rest: str) -> str:
    """A comment after a value (`key: value   # says`), not a `#` inside a quoted value."""
    match = re.search(r"\s#\s(.*)$", rest)
    if match is None or rest.count('"', 0, match.start()) % 2 or rest.count("'", 0, match.start()) % 2:
        return ""
    return match.group(1).strip()


def documented_keys(text: str) -> list[tuple[tuple[str, ...], str]]:
    """(path, comment) of every key of a values file, in order; comment "" where none is written."""
    found: list[tuple[tuple[str, ...], str]] = []
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    in_list = -1  # the indent of the list item being read: its keys are its, not the chart's
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            pending = []
            continue
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        indent = len(line) - len(line.lstrip(" "))
        if stripped.startswith("- "):
            in_list = indent if in_list < 0 else min(in_list, indent)
            pending = []
            continue
        if 0 <= in_list < indent:
            continue
        in_list = -1
        match = KEY.match(line)
        if match is None:  # a continued value
            pending = []
            continue
        stack = [(i, k) for i, k in stack if i < indent] + [(indent, match["key"])]
        comment = " ".join([*pending, _inline_comment(match["rest"])]).strip()
        found.append((tuple(k for _, k in stack), comment))
        pending = []
    return found


def _value(values: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        values = values[key]
    return values


def _shown(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    text = text.removesuffix("...").strip()
    if len(text) > DEFAULT_WIDTH:
        text = text[: DEFAULT_WIDTH - 3] + "..."
    return "`" + text.replace("|", "\\|") + "`"


def table(values_text: str) -> str:
    values = yaml.safe_load(values_text)
    rows = ["| value | default | what it does |", "|---|---|---|"]
    described: set[tuple[str, ...]] = set()
    for path, comment in documented_keys(values_text):
        value = _value(values, path)
        covered = any(path[:n] in described for n in range(1, len(path)))
        if comment:
            described.add(path)
        if not covered and (comment or not (isinstance(value, dict) and value)):
            said = comment.replace("|", "\\|")
            rows.append(f"| `{'.'.join(path)}` | {_shown(value)} | {said} |")
    return "\n".join(rows)


def outputs() -> dict[Path, str]:
    readme = README.read_text()
    head, _, rest = readme.partition(BEGIN)
    _, _, tail = rest.partition(END)
    generated = f"{BEGIN}\n\n{table((CHART / 'values.yaml').read_text())}\n\n{END}"
    return {README: head + generated + tail}
