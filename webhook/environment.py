"""Numbers the process reads from its environment (GPU_ADMISSION_*), checked where they are read:
a bad value is one clear line and exit 2 at start, never a traceback from deep inside gunicorn."""

from __future__ import annotations

import sys
from collections.abc import Mapping


def positive_setting(env: Mapping[str, str], name: str, default: str, whole: bool = False) -> float:
    """A number from the environment, or one clear line and exit 2 (never a traceback at start)."""
    text = env.get(name, default)
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = 0
    if not value > 0:
        kind = "a positive whole number" if whole else "a positive number"
        print(f"error: {name}={text!r} is not {kind}", file=sys.stderr)
        raise SystemExit(2)
    return value
