"""Commit messages held to the format CONTRIBUTING.md states: a subject of at most 72 characters
that says what changed (no trailing period), then, where there is more to say, a blank line and
the why in the body. `python -m tools.commit_subjects [RANGE]` checks every commit after the last
one written before the rule (`HELD_SINCE`), or RANGE, and fails (exit 1) naming each that breaks
it; CI runs it. A shallow clone without that commit checks the commits it has that are newer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBJECT_LIMIT = 72
HELD_SINCE = "1d7c299"  # the last commit before the rule: its subject ran to 250 characters
SEPARATOR = "\x1e"  # between commits in `git log` output: no message holds it


def problems(message: str) -> list[str]:
    """What is wrong with one commit message (none: it keeps the format)."""
    lines = message.rstrip("\n").split("\n")
    subject = lines[0]
    found = []
    if not subject.strip():
        found.append("an empty subject")
    if len(subject) > SUBJECT_LIMIT:
        found.append(f"a subject of {len(subject)} characters (at most {SUBJECT_LIMIT})")
    if subject.rstrip().endswith("."):
        found.append("a subject ending in a period")
    if len(lines) > 1 and lines[1].strip():
        found.append("no blank line between the subject and the body")
    return found


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())
    return done.stdout


def commits(revisions: str | None = None) -> list[tuple[str, str]]:
    """(short hash, message) of the commits to check, newest first."""
    if revisions is None:
        try:
            _git("cat-file", "-e", f"{HELD_SINCE}^{{commit}}")
            revisions = f"{HELD_SINCE}..HEAD"
        except RuntimeError:  # a shallow clone without it: every commit it has is newer
            revisions = "HEAD"
    listed = _git("log", f"--format=%h%n%B{SEPARATOR}", revisions)
    found = []
    for entry in listed.split(SEPARATOR):
        entry = entry.lstrip("\n")
        if entry:
            short, _, message = entry.partition("\n")
            found.append((short, message))
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        checked = commits(args[0] if args else None)
    except (RuntimeError, OSError) as error:
        if args:  # a range asked for and not read: that is an error
            print(f"error: {error}", file=sys.stderr)
            return 2
        # No git, or not a checkout (an exported tree): nothing to hold to the format.
        print(f"commit messages not checked: {error or 'no git history here'}", file=sys.stderr)
        return 0
    bad = [(short, found) for short, message in checked if (found := problems(message))]
    for short, found in bad:
        print(f"commit {short}: {'; '.join(found)} (CONTRIBUTING.md, Commits)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
