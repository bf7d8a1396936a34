"""The writers of this replica's share entries (webhook.cluster.quota.shares.escrow): `refill` grants a
share in the replica's turn at a budget's Lease, and `ShareKeeper` writes entries again when due,
at once when another replica asks for a share back, and refills a share ahead of need once
admissions have drawn it under half its last grant."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from policies import Quota, Usage
from webhook.cluster.quota.leases.lease_entries import GRANT_PREFIX
from webhook.cluster.quota.leases.lease_wire import LedgerUnavailable
from webhook.cluster.quota.leases.shared_quota import SharedReservations
from webhook.cluster.quota.shares.escrow import Dims, Escrow, Key, as_usage
from webhook.events import LeaseMoved, ShareLow, SharesWanted
from webhook.service import Loop

log = logging.getLogger("gpu_admission.quota")


def _not_written() -> None:
    # An API server away: the entries expire, or are written next time.
    log.warning("quota shares not written", exc_info=True)


def refill(
    escrow: Escrow,
    shared: SharedReservations,
    keys: tuple[Key, ...],
    quotas: Mapping[Key, Quota],
    need: Usage,
    free: Callable[[Key, Quota], Dims],
    ahead: bool = False,
) -> bool:
    """Grant this replica a share of every budget in `keys` that holds `need` (in its turn at
    their Leases); False where one cannot (near the limit, or the Lease moved twice): the per-pod
    path decides then. `free(key, quota)`: what the budget has free in this replica's view, its
    own share's remainder taken out too, read in one step with it (an admission from the share
    meanwhile must not slip between the two). `ahead`: refilled by the keeper before the share
    runs out, not by an admission that found it spent (no fallback follows a refusal)."""
    for key in keys:
        quota = quotas.get(key)
        if quota is None:
            return False
        for _ in range(2):  # on the Lease as last read: a write on a stale one fails, and reads it again
            extra = escrow.grant(key, quota, need, free(key, quota), shared.holders(key, escrow.key))
            if extra is None:
                escrow.fallbacks += 0 if ahead else 1
                return False
            with escrow.writing(key):
                entry = escrow.held_with(key, quota, extra)
                written = shared.leases.put(key, escrow.key, as_usage(entry))
                if written:
                    escrow.granted(key, quota, extra, need)
                    escrow.ahead += 1 if ahead else 0
            if written:
                break
        else:
            escrow.fallbacks += 0 if ahead else 1
            return False
    return True


class ShareKeeper:
    """This replica's shares, out of admission: their entries written again when due
    (`Escrow.due`: a third of `ttl` old, admissions aged out of them, an idle share given back),
    refilled ahead of need, granted as the replica starts and after a new policy set, and given
    back near the limit. One thread per replica."""

    def __init__(
        self,
        escrow: Escrow,
        shared: SharedReservations,
        every: float | None = None,
        top_up: Callable[[Key, Quota, Usage], bool] = lambda key, quota, need: False,
        warm: Callable[[], int] = lambda: 0,
        crowded: Callable[[Key], bool] = lambda key: False,
    ) -> None:
        self.escrow = escrow
        self.shared = shared
        self.every = every if every is not None else escrow.ttl / 6
        # Refills a share ahead of need, in the replica's turn at its Lease (BudgetHoldings.top_up):
        # admissions go on taking from what is left meanwhile, and none waits on the write. And
        # grants shares of the budgets in use where this replica holds none (BudgetHoldings.warm),
        # when asked (`warm_soon`: as the replica starts, and after a new policy set).
        self.top_up = top_up
        self.warm = warm
        self._warm_due = False
        # Near the limit what a share holds goes back (BudgetHoldings.crowded), looked at when the
        # Lease moves (`moved`, from the Lease watch) and when a refill ahead is refused.
        self.crowded = crowded
        self._to_check: set[Key] = set()
        self._loop = Loop("quota-shares", lambda _: self.keep(), self.every, _not_written, join=5)

    def start(self) -> None:
        self._loop.start()

    def low(self, _: ShareLow) -> None:
        """Admissions drew a share of this replica's under half its last grant: refilled now, in
        this thread."""
        self._loop.wake()

    def wanted(self, event: SharesWanted) -> None:
        """Replicas ask for a budget back, as the Lease watch shows: what is left of this
        replica's share goes back now, not when it turns idle."""
        if event.asking - {self.escrow.key.removeprefix(GRANT_PREFIX)}:
            self.escrow.give_back(event.key)
            self._loop.wake()  # written again if it says other than it should (`due`), given back or not

    def moved(self, event: LeaseMoved) -> None:
        """The Lease watch shows a budget's Lease written: if this replica holds a share of it,
        whether the budget is near the limit now is looked at in this thread."""
        if self.escrow.holding(event.key) is not None:
            self._to_check.add(event.key)
            self._loop.wake()

    def warm_soon(self) -> None:
        """Grant shares of the budgets in use that this replica holds none of, in this thread."""
        self._warm_due = True
        self._loop.wake()

    def stop(self, wait: bool = True) -> None:
        self._loop.stop(wait)

    def keep(self) -> None:
        if self._warm_due:
            self._warm_due = False
            if granted := self.warm():
                log.info("quota shares granted ahead of admissions", extra={"fields": {"budgets": granted}})
        for key, quota, need in self.escrow.low():
            try:
                refilled = self.top_up(key, quota, need)
            except LedgerUnavailable:
                refilled = False
            if not refilled:
                self.escrow.not_ahead(key)  # the admission that finds it spent asks, as before
                self._to_check.add(key)  # refused near the limit: what is left goes back too
        while self._to_check:
            key = self._to_check.pop()
            if self.crowded(key):
                self.escrow.give_back(key)  # written below (due), with what it admitted lately
        for key in self.escrow.due(self.escrow.monotonic()):
            # Out of this replica's turn: its admissions may hold it for a while, asking others
            # or retrying writes, and a request for its share waits on this write.
            with self.escrow.writing(key):
                for _ in range(3):  # the Lease read again after a conflict: another replica wrote
                    held, pods = self.escrow.entries(key)
                    own = None if held is None or not any(held.values()) else as_usage(held)
                    if self.shared.leases.put_all(key, {self.escrow.key: own, **pods}):
                        if held is not None:
                            self.escrow.rewritten(key, held, pods)
                        break
