"""The writers of this replica's share entries (webhook.cluster.quota.escrow): `refill` grants a
share in the replica's turn at a budget's Lease, and `ShareKeeper` writes entries again when due,
at once when another replica asks for a share back."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from policies import Quota, Usage
from webhook.cluster.quota.escrow import Escrow, Key, as_usage, dims_of, limits_of
from webhook.cluster.quota.ledger import GRANT_PREFIX
from webhook.cluster.quota.shared_quota import SharedReservations

log = logging.getLogger("gpu_admission.quota")


def refill(
    escrow: Escrow,
    shared: SharedReservations,
    keys: tuple[Key, ...],
    quotas: Mapping[Key, Quota],
    need: Usage,
    claimed: Callable[[Key], Usage],
) -> bool:
    """Grant this replica a share of every budget in `keys` that holds `need` (in its turn at
    their Leases); False where one cannot (near the limit, or the
    Lease moved twice): the per-pod path decides then. `claimed(key)`: what the budget holds in
    this replica's view, its own share left out (its pods counters, the other entries, its own
    reservations)."""
    for key in keys:
        quota = quotas.get(key)
        if quota is None:
            return False
        for _ in range(2):  # on the Lease as last read: a write on a stale one fails, and reads it again
            used = dims_of(quota, claimed(key))
            own = escrow.remaining(key, quota)
            free = {name: limit - used.get(name, 0) - own.get(name, 0) for name, limit in limits_of(quota).items()}
            extra = escrow.grant(key, quota, need, free, shared.holders(key, escrow.key))
            if extra is None:
                escrow.fallbacks += 1
                return False
            with escrow.writing(key):
                entry = escrow.held_with(key, quota, extra)
                written = shared.put(key, escrow.key, as_usage(entry))
                if written:
                    escrow.granted(key, quota, extra)
            if written:
                break
        else:
            escrow.fallbacks += 1
            return False
    return True


class ShareKeeper:
    """Writes this replica's share entries again when due (`Escrow.due`): a third of `ttl` old,
    admissions aged out of them, an idle share given back. One thread per replica."""

    def __init__(self, escrow: Escrow, shared: SharedReservations, every: float | None = None) -> None:
        self.escrow = escrow
        self.shared = shared
        self.every = every if every is not None else escrow.ttl / 6
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quota-shares", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wanted(self, key: Key, asking: frozenset[str]) -> None:
        """Replicas (`asking`: their entries' names) ask for the budget of `key` back, as the Lease
        watch shows: what is left of this replica's share goes back now, not when it turns idle."""
        if asking - {self.escrow.key.removeprefix(GRANT_PREFIX)}:
            self.escrow.give_back(key)
            self._wake.set()  # written again if it says other than it should (`due`), given back or not

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        if wait and self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.every)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.keep()
            except Exception:  # an API server away: the entries expire, or are written next time
                log.warning("quota shares not written", exc_info=True)

    def keep(self) -> None:
        for key in self.escrow.due(self.escrow.monotonic()):
            # Out of this replica's turn: its admissions may hold it for a while, asking others
            # or retrying writes, and a request for its share waits on this write.
            with self.escrow.writing(key):
                for _ in range(3):  # the Lease read again after a conflict: another replica wrote
                    held, pods = self.escrow.entries(key)
                    own = None if held is None or not any(held.values()) else as_usage(held)
                    if self.shared.put_all(key, {self.escrow.key: own, **pods}):
                        if held is not None:
                            self.escrow.rewritten(key, held, pods)
                        break
