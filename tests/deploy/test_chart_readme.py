"""The chart README's table of values is written from values.yaml (tools/chart_readme.py): every
value has a row of its own or is shown in its mapping's row, with its default and the comment
written for it."""

from __future__ import annotations

from typing import Any

import yaml

from tools.chart_readme import CHART, documented_keys, table

VALUES = (CHART / "values.yaml").read_text()


def leaves(node: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() for leaf in leaves(value, (*path, key))]
    return [path]


def test_every_value_is_in_the_table_itself_or_by_its_mapping():
    rows = {line.split("`")[1] for line in table(VALUES).splitlines()[2:]}
    for leaf in leaves(yaml.safe_load(VALUES)):
        shown = [".".join(leaf[:n]) for n in range(1, len(leaf) + 1) if ".".join(leaf[:n]) in rows]
        assert shown, ".".join(leaf)


def test_every_row_says_what_it_does():
    for line in table(VALUES).splitlines()[2:]:
        assert line.rsplit("|", 2)[-2].strip(), line


def test_comments_above_and_beside_a_key_are_its_own_and_list_items_are_not_keys():
    text = "# the top\n\n# above\na: 1  # beside\nb:\n  - c: 2\n    d: 3\ne: {}\n"
    assert documented_keys(text) == [(("a",), "above beside"), (("b",), ""), (("e",), "")]
    assert "| `a` | `1` | above beside |" in table(text)


def test_the_readme_holds_the_table_as_written():
    assert table(VALUES) in (CHART / "README.md").read_text()
