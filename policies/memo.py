"""The engine's one caching idiom for derived values.

A pure function of a few small hashable arguments is wrapped in `functools.lru_cache`. A value
derived from an immutable owner (a PolicySet, the Catalog) is kept in a `Memo` that owner holds:
it never goes stale, and it goes with the owner when a new set is swapped in. Both are bounded,
since keys may carry texts users choose; past its limit a Memo computes and does not keep.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")

LIMIT = 4096


class Memo:
    __slots__ = ("_limit", "_values")

    def __init__(self, limit: int = LIMIT) -> None:
        self._values: dict[Hashable, object] = {}
        self._limit = limit

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """`build()`, computed once per key (an exception is raised each time, never kept)."""
        try:
            return self._values[key]  # type: ignore[return-value]
        except KeyError:
            value = build()
            if len(self._values) < self._limit:
                self._values[key] = value
            return value

    def __len__(self) -> int:
        return len(self._values)
