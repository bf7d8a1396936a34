"""Policies are read with libyaml's parser (CSafeLoader) for speed; every file:line a problem names
must be what the pure-Python parser would say, on the shipped policies and on random documents."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.model.yamldoc import FAST_LOADER, read_documents

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(
    [*ROOT.glob("examples/policies/*.yaml"), *ROOT.glob("policies/bundled/*.yaml"), *ROOT.glob("deploy/**/*.yaml")]
)


def lines(text: str, loader: type) -> list[tuple[int, int, dict[str, int]]]:
    return [(d.index, d.line, d.lines) for d in read_documents("f.yaml", text, loader)]


def error_line(text: str, loader: type) -> int | None:
    try:
        list(read_documents("f.yaml", text, loader))
    except yaml.MarkedYAMLError as error:
        return error.problem_mark.line if error.problem_mark else -1
    return None


def test_the_fast_parser_is_libyamls():
    assert issubclass(FAST_LOADER, yaml.CSafeLoader), "PyYAML without libyaml: policies load five times slower"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_file_gets_the_same_line_for_every_field(path):
    text = path.read_text()
    assert lines(text, FAST_LOADER) == lines(text, yaml.SafeLoader)


scalars = st.one_of(st.integers(), st.booleans(), st.none(), st.text(max_size=12), st.floats(allow_nan=False))
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(documents, min_size=1, max_size=3), st.sampled_from([None, True, False]))
def test_random_documents_get_the_same_lines_from_both_parsers(docs, flow):
    text = yaml.safe_dump_all(docs, default_flow_style=flow, allow_unicode=True)
    assert lines(text, FAST_LOADER) == lines(text, yaml.SafeLoader)


@settings(max_examples=300, deadline=None)
@given(documents, st.integers(0, 400), st.sampled_from(["", "]", "{", ": :", "\t", "- [", '"']))
def test_a_broken_document_is_reported_at_the_line_the_pure_python_parser_names(doc, cut, junk):
    text = yaml.safe_dump(doc, default_flow_style=False)
    broken = text[:cut] + junk + text[cut:]
    fast, slow = error_line(broken, FAST_LOADER), error_line(broken, yaml.SafeLoader)
    if fast is not None:  # libyaml takes a few texts the pure-Python scanner refuses (a trailing tab)
        assert fast == slow
