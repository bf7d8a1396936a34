"""What runs in the background of a replica, one way: the `Service` protocol every background
part keeps (started once, stopped once, waiting for its thread unless told not to), and `Loop`,
the one thread loop the periodic parts run: a step every `every` seconds, or at once when woken,
until stopped. A step that fails is reported by its owner's `failed` and the loop goes on: no
bad turn ends a part that the replica relies on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol


class Service(Protocol):
    def start(self) -> None: ...

    def stop(self, wait: bool = True) -> None: ...


def _never() -> bool:
    return False


class Loop:
    """One daemon thread named `name` running `step(woken)` (`woken`: it was woken, not timed out)
    every `every` seconds or when `wake` is called, until `stop`, or until `until()` holds when it
    wakes. `failed` runs inside the handler of a step's exception (so it may log it with its
    traceback); `join` bounds how long `stop` waits for the thread."""

    def __init__(
        self,
        name: str,
        step: Callable[[bool], object],  # what it returns is not read
        every: float,
        failed: Callable[[], None],
        *,
        until: Callable[[], bool] = _never,
        join: float = 10.0,
    ) -> None:
        self.name = name
        self._step, self._every, self._failed, self._until, self._join = step, every, failed, until, join
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> bool:
        """Whether it has been woken and has not run the step for it yet."""
        return self._wake.is_set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wake(self, *_: object) -> None:
        self._wake.set()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join(self._join)

    def _run(self) -> None:
        while not self._stop.is_set():
            woken = self._wake.wait(self._every)
            self._wake.clear()
            if self._stop.is_set() or self._until():
                return
            try:
                self._step(woken)
            except Exception:
                self._failed()
