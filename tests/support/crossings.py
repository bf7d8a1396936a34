"""Calls between the edge (`webhook`) and the engine (`policies`), as a profiler sees them: what
tests/edge/test_edge_engine_crossings.py holds an admission to."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

LAYERS = frozenset({"webhook", "policies"})


def _layer(frame: FrameType | None) -> str:
    return "" if frame is None else str(frame.f_globals.get("__name__", "")).partition(".")[0]


def crossings(run: Callable[[], Any]) -> Counter[tuple[str, str, str]]:
    """Each call in this thread from one layer into the other while `run` runs, as (the caller's
    layer, the caller, the callee), counted. A value class's constructor (a Usage made from a
    Lease entry read) is data made, not a call into the engine's logic: not counted."""
    found: Counter[tuple[str, str, str]] = Counter()
    me = threading.get_ident()

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event != "call" or threading.get_ident() != me or frame.f_code.co_name == "__init__":
            return
        callee, caller = _layer(frame), _layer(frame.f_back)
        if callee != caller and {callee, caller} == LAYERS:
            assert frame.f_back is not None
            found[(caller, frame.f_back.f_code.co_qualname, frame.f_code.co_qualname)] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return found
