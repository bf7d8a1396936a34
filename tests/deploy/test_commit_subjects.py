"""Commit messages keep CONTRIBUTING.md's format (tools/commit_subjects.py, run by CI): a subject
of at most 72 characters, no trailing period, a blank line before the body."""

from __future__ import annotations

import shutil

import pytest

from tools.commit_subjects import ROOT, commits, problems


def test_a_short_subject_and_a_body_after_a_blank_line_keep_the_format():
    assert problems("Index match conditions by any field\n\nWhy it matters.\n") == []
    assert problems("Fix a typo\n") == []


@pytest.mark.parametrize(
    "message, problem",
    [
        ("x" * 73, "a subject of 73 characters (at most 72)"),
        ("Fix the thing.\n", "a subject ending in a period"),
        ("Fix the thing\nwhy, with no blank line\n", "no blank line between the subject and the body"),
        ("\n\nbody only\n", "an empty subject"),
    ],
    ids=["long", "period", "no-blank-line", "empty"],
)
def test_each_break_of_the_format_is_named(message, problem):
    assert problem in problems(message)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_every_commit_since_the_rule_keeps_it():
    assert [(short, problems(message)) for short, message in commits() if problems(message)] == []
