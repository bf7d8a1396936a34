"""One replica at a time does what must be done once for the whole cluster (reporting policy
status on ConfigMaps): it holds a Lease (certs.lease), renewed in a thread; the others try it
now and then and take over once it has gone unrenewed for its duration, as they measure it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from certs.lease import LeaseLock

log = logging.getLogger("gpu_admission.leadership")


class Leadership:
    def __init__(
        self,
        lock: LeaseLock,
        every: float,
        on_lead: Callable[[], None] = lambda: None,
        chores: tuple[tuple[float, Callable[[], object]], ...] = (),
    ) -> None:
        self.lock = lock
        self.every = every  # a third of the Lease's duration, as client-go renews
        self.on_lead = on_lead  # runs when this replica becomes the leader (catch up on what it missed)
        self.chores = chores  # (period in seconds, what): done by the leader only, each at most that often
        self._done_at: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def leading(self) -> bool:
        return self.lock.held

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"lease-{self.lock.name}", daemon=True)
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait and self._thread is not None:
            self._thread.join(10)

    def _do_chores(self) -> None:
        now = time.monotonic()
        for index, (period, chore) in enumerate(self.chores):
            if now - self._done_at.get(index, -period) < period:
                continue
            self._done_at[index] = now
            try:
                chore()
            except Exception:
                log.exception("a leader's chore failed", extra={"fields": {"lease": self.lock.name}})

    def _run(self) -> None:
        leading = False
        while not self._stop.is_set():
            try:
                now_leading = self.lock.try_lead()
            except Exception as error:  # the API server away: not leading until it answers again
                log.warning("lease unreachable", extra={"fields": {"lease": self.lock.name, "error": str(error)}})
                now_leading = False
            if now_leading and not leading:
                log.info("leading", extra={"fields": {"lease": self.lock.name, "identity": self.lock.identity}})
                try:
                    self.on_lead()
                except Exception:
                    log.exception("catching up as the new leader failed", extra={"fields": {"lease": self.lock.name}})
            leading = now_leading
            if leading:
                self._do_chores()
            self._stop.wait(self.every)
        self.lock.release()
