"""Work that runs beside the server (policy watches, certificate renewal, leadership), started in
the gunicorn worker after fork: threads and client connections do not survive a fork, so the
master only registers them. On the worker's way out the registered stops run (a held Lease is
given up, so another replica takes over at once instead of waiting out its duration)."""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("gpu_admission.background")
_starters: list[Callable[[], None]] = []
_stoppers: list[Callable[[], None]] = []


def register(starter: Callable[[], None]) -> None:
    _starters.append(starter)


def on_exit(stopper: Callable[[], None]) -> None:
    _stoppers.append(stopper)


def start_all() -> None:
    for starter in _starters:
        starter()


def stop_all() -> None:
    for stopper in reversed(_stoppers):
        try:
            stopper()
        except Exception:
            log.exception("stopping background work failed")
