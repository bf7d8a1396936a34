"""How many connections each gunicorn worker holds, in memory the master shares with every worker.

A kept-alive connection stays for its whole life with the worker that accepted it, and the API
server keeps a few connections for a long time: left to the race for accept(), most of them can
end up on one worker while the others idle (bench/load.py saw all four of its connections on one
of two workers). With these counts a worker holding more connections than its least loaded
sibling leaves a new connection to that sibling (webhook.serving.worker). This is Envoy's exact
connection balance, done the only way separate processes can: by not accepting.

The table is an anonymous shared mmap made when the master imports this module, so every worker
it forks writes to the same pages. The master hands out slots (gunicorn_conf's pre_fork) and
empties a dead worker's (child_exit); a worker fills its own once it accepts connections. A slot
is a 4-byte aligned int: a write is never seen torn, and a reader that sees a count a moment old
only balances a moment late.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable

SLOTS = 64
EMPTY = 2**31 - 1  # no worker in the slot: never the fewest


class ConnectionCounts:
    def __init__(self, slots: int = SLOTS) -> None:
        self._memory = mmap.mmap(-1, 4 * slots)  # MAP_SHARED | MAP_ANONYMOUS: kept across fork
        self._counts = memoryview(self._memory).cast("i")
        for slot in range(slots):
            self._counts[slot] = EMPTY

    def claim(self, taken: Iterable[int | None]) -> int | None:
        """The lowest slot no live worker holds; None when all are held. It stays empty until
        its worker starts accepting: siblings must not leave connections to one still booting."""
        held = set(taken)
        return next((slot for slot in range(len(self._counts)) if slot not in held), None)

    def set(self, slot: int, connections: int) -> None:
        self._counts[slot] = connections

    def clear(self, slot: int) -> None:
        """The worker in the slot takes no more connections (stopping or gone)."""
        self._counts[slot] = EMPTY

    def fewest_besides(self, slot: int) -> int | None:
        """The fewest connections any other accepting worker holds; None when there is none."""
        counts = self._counts.tolist()
        counts[slot] = EMPTY
        fewest: int = min(counts)
        return None if fewest == EMPTY else fewest


COUNTS = ConnectionCounts()
