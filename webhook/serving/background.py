"""Work that runs beside the server (policy watches), started in each gunicorn worker after fork:
threads and client connections do not survive a fork, so the master only registers them."""

from __future__ import annotations

from collections.abc import Callable

_starters: list[Callable[[], None]] = []


def register(starter: Callable[[], None]) -> None:
    _starters.append(starter)


def start_all() -> None:
    for starter in _starters:
        starter()
