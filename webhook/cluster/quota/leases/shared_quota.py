"""Reservations of `consistency: strict` quotas, shared by every replica through the API server.

One Lease per (policy, scope) in the webhook's namespace holds the reservations of pods admitted
but not yet seen in the pod watch, in an annotation. A replica admits against its own pod
counters plus the Lease's reservations it has not yet seen as pods, and records its reservation
by replacing the Lease at the resourceVersion it read: if another replica wrote in between, the
API server answers 409 Conflict, the Lease is read again and the pod judged again. So replicas
never overshoot together. Entries stay until they expire (a replica whose watch lags still
counts them), and each replica skips the ones whose pods its own watch already counts.

Within a replica, admissions under one Lease take turns (`turn`): they would only conflict with
each other. Reading, writing and watching the Leases, and when an entry expires, are
webhook.cluster.quota.leases.ledger_leases'.

The cost of that path: one write to the API server per admission (and a read after each
conflict), against none on the `local` path. So far from the limit a replica admits from its share
of the budget instead, an entry `grant:` here (webhook.cluster.quota.shares.escrow), written once a share.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from policies import EMPTY, Usage
from webhook.cluster.quota.counting.reservations import PodRef
from webhook.cluster.quota.leases.lease_entries import (
    GRANT_PREFIX,
    WANT_PREFIX,
    Asked,
    Entry,
    Key,
    LeaseState,
    Mark,
    mark,
)
from webhook.cluster.quota.leases.ledger_leases import LedgerLeases

ASK_ATTEMPTS = 5  # writes of a request for shares back, each on the Lease as read after a conflict


class SharedReservations:
    """Pods' reservations and replicas' shares in the ledger Leases (`leases`: read, written and
    watched there), this replica's turns at them, and its requests for shares back."""

    def __init__(self, leases: LedgerLeases) -> None:
        self.leases = leases
        self._lock = threading.Lock()
        # Per Lease: admissions' turns, the shares asked back last, and the request written and
        # not yet closed.
        self._turns: dict[Key, threading.Lock] = {}
        self._asked: dict[Key, set[Mark]] = {}
        self._open: dict[Key, Asked] = {}

    @contextlib.contextmanager
    def turn(self, keys: tuple[Key, ...], timeout: float) -> Iterator[bool]:
        """This replica's turn at the Leases of `keys` (taken in one order: no deadlock); yields
        False if it did not come within `timeout` seconds."""
        with self._lock:
            locks = [self._turns.setdefault(key, threading.Lock()) for key in sorted(set(keys))]
        monotonic = self.leases.monotonic
        deadline = monotonic() + timeout
        taken: list[threading.Lock] = []
        try:
            for lock in locks:
                if not lock.acquire(timeout=max(0.0, deadline - monotonic())):
                    yield False
                    return
                taken.append(lock)
            yield True
        finally:
            for lock in reversed(taken):
                lock.release()

    def reserve(self, keys: tuple[Key, ...], pod: PodRef, usage: Usage) -> bool:
        """Add the pod's reservation to every Lease; False if one moved since it was read (it is
        read again: judge the pod again and retry)."""
        return all(self.leases.put(key, pod.key, usage) for key in keys)

    def holders(self, key: Key, own: str) -> int:
        """Replicas other than `own` holding a share of the budget (its entries `grant:<replica>`)."""
        return sum(1 for entry in self.leases.live(key) if entry.key.startswith(GRANT_PREFIX) and entry.key != own)

    def withdraw(self, keys: tuple[Key, ...], pod: PodRef) -> None:
        """Take the pod's entry out of every Lease (its pod was never created). Best effort: an
        entry that stays expires with its TTL."""
        for key in keys:
            self.leases.remove(key, pod.key)

    # -- asking for shares back ----------------------------------------------------------------
    def shares_held(self, key: Key, own: str) -> tuple[Entry, ...]:
        """Other replicas' share entries in the Lease as last read that hold something."""
        return tuple(
            entry
            for entry in self.leases.live(key)
            if entry.key.startswith(GRANT_PREFIX) and entry.key != own and not entry.usage.is_zero
        )

    def ask_back(self, key: Key, own: str) -> Asked | None:
        """Ask the replicas holding shares of `key` to give them back: an entry `want:<own>` they
        see in their Lease watch. In this replica's turn at `key`. None, asking nothing, when the
        shares held are those asked about last time: what they hold then is pods admitted
        lately (written since as the pods' own entries), or a holder did not answer in time."""
        want = WANT_PREFIX + own.removeprefix(GRANT_PREFIX)
        for _ in range(ASK_ATTEMPTS):  # a conflict reads the Lease again: the shares held may have moved
            asked = {mark(e) for e in self.shares_held(key, own)}
            with self._lock:
                if (open_ask := self._open.get(key)) is not None:
                    return open_ask  # asked already, not answered yet: this pod waits for that answer too
                if not asked or self._asked.get(key) == asked:
                    return None
            if self.leases.put(key, want, EMPTY):
                request = Asked(key, want, frozenset(asked))
                with self._lock:  # asked about only once written: a request lost to conflicts is asked again
                    self._asked[key] = asked
                    self._open[key] = request
                return request
        return None

    def await_answer(self, asked: Asked, timeout: float) -> None:
        """Wait until each holder asked has written its entry again, or `timeout`. Out of this
        replica's turn: the holders' answers may wait on theirs, and their own admissions, asking
        in turn, on ours."""
        self.leases.await_watched(asked.key, lambda state: _answered(state, asked.want, asked.marks), timeout)

    def close_ask(self, asked: Asked) -> None:
        """Read the Lease as the holders left it and take the request out, once for every pod
        waiting on it (the others find it closed, and the Lease read). In this replica's turn."""
        key = asked.key
        with self._lock:
            if self._open.get(key) is not asked:
                return
        try:
            self.leases.read_again(key)  # the holders wrote meanwhile
            for _ in range(3):  # taken out at once (a conflict reads again); were it left, it would expire with the TTL
                if self.leases.put(key, asked.want, None):
                    break
        finally:
            with self._lock:
                self._open.pop(key, None)


def _answered(state: LeaseState, want: str, asked: frozenset[Mark]) -> bool:
    """The Lease watch shows the request, and none of the share entries asked about as it was:
    each holder has written its own again. (Before the watch shows the request, what it shows
    may predate the holders' entries: that is no answer.)"""
    if not any(e.key == want for e in state.entries):
        return False
    return not asked & {mark(e) for e in state.entries if e.key.startswith(GRANT_PREFIX)}
