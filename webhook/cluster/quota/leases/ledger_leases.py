"""The ledger Leases of `consistency: strict` quotas as one replica reads, writes and watches
them (webhook.cluster.quota.leases.shared_quota says what is in them and why).

Every write replaces a Lease at the resourceVersion this replica last read: if another replica
wrote in between, the API server answers 409 Conflict and the Lease is read again (`put` says
False). An entry counts until `ttl` after *this* replica first read it, on its own monotonic
clock: the `expires` written in it is for people, since comparing another replica's clock with
ours would let a fast clock drop entries that are still live. What the Lease watch shows is kept
beside what this replica read or wrote, never in its place (a late event would take it back a
version): it tells when a Lease moved, and wakes those waiting on one. The status leader deletes
Leases whose every entry expired long ago (`sweep`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from policies import Usage
from webhook.cluster.quota.leases.lease_entries import (
    WANT_PREFIX,
    Entry,
    Key,
    LeaseState,
    lease_key,
    lease_name,
    parse_lease,
)
from webhook.cluster.quota.leases.lease_wire import LeaseWire, LedgerUnavailable
from webhook.events import Events, LeaseMoved, SharesWanted
from webhook.metrics import STRICT_CONFLICTS

SWEEP_GRACE = 300.0  # seconds past the last reservation's expiry before its Lease is deleted


class LedgerLeases:
    def __init__(
        self,
        api: Any,
        namespace: str,
        identity: str,
        ttl: float = 30.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        events: Events | None = None,
    ) -> None:
        self.wire = LeaseWire(api, namespace, identity)  # reads and writes them
        self.ttl = ttl
        self.clock = clock  # only for the `expires` people read in an entry
        self.monotonic = monotonic
        self.conflicts = 0
        self._states: dict[Key, LeaseState] = {}
        self._first_seen: dict[Key, dict[tuple[str, float], float]] = {}  # (pod, expires) -> when we read it
        self._lock = threading.Lock()
        # What the Lease watch shows (webhook.cluster.wiring): it never replaces what this replica
        # read or wrote (a late event would take it back a version); it wakes those waiting on a
        # Lease, and tells the shares when another replica asks for them back (`on_wanted`).
        self._watched: dict[Key, LeaseState] = {}
        self._moved = threading.Condition(self._lock)
        self.events = events  # SharesWanted and LeaseMoved published to (None: no keeper hears)

    def live(self, key: Key) -> list[Entry]:
        """The entries of the Lease of `key` as last read (read now if never) that still count."""
        now = self.monotonic()
        return [entry for entry in self._state(key).entries if self._alive(key, entry, now)]

    def _alive(self, key: Key, entry: Entry, now: float) -> bool:
        with self._lock:
            first = self._first_seen.setdefault(key, {}).setdefault((entry.key, entry.expires), now)
        return now < first + self.ttl

    def put(self, key: Key, entry_key: str, usage: Usage | None) -> bool:
        """Write the entry `entry_key` (a pod's reservation, or a replica's share: `None` takes it
        out) into the Lease of `key`, at the version read; False if the Lease moved since (it is
        read again)."""
        return self.put_all(key, {entry_key: usage})

    def put_all(self, key: Key, changes: Mapping[str, Usage | None]) -> bool:
        """`put` of several entries in one write (a share's entry with the pods it itemizes)."""
        state = self._state(key)
        now = self.monotonic()
        entries = [e for e in state.entries if self._alive(key, e, now) and e.key not in changes]
        expires = math.ceil(self.clock() + self.ttl)  # in whole seconds, as stored
        entries.extend(Entry(entry_key, expires, usage) for entry_key, usage in changes.items() if usage is not None)
        try:
            written = self.wire.write(key, state.version, entries)
        except ApiException as error:
            if error.status not in (404, 409):
                raise LedgerUnavailable(f"{lease_name(key)}: {error.status} {error.reason}") from None
            self.conflicts += 1
            STRICT_CONFLICTS.inc()
            self._remember(key, self.wire.read(key))
            return False
        except Exception as error:  # refused, reset, timed out
            raise LedgerUnavailable(f"{lease_name(key)}: {type(error).__name__}") from None
        self._remember(key, written)
        return True

    def remove(self, key: Key, entry_key: str) -> None:
        """Take the entry `entry_key` out of the Lease of `key`, as read now. Best effort: an entry
        that stays expires with its TTL."""
        for _ in range(3):
            try:
                state = self.wire.read(key)
                entries = [e for e in state.entries if e.key != entry_key]
                if len(entries) == len(state.entries) or not state.version:
                    return
                self._remember(key, self.wire.write(key, state.version, entries))
                return
            except ApiException as error:
                if error.status != 409:
                    return
            except Exception:  # refused, reset, timed out: it expires anyway
                return

    def read_again(self, key: Key) -> None:
        """Read the Lease of `key` now, whatever was read before."""
        self._remember(key, self.wire.read(key))

    def await_watched(self, key: Key, shows: Callable[[LeaseState], bool], timeout: float) -> bool:
        """Wait until the Lease watch `shows` the Lease of `key` so, or `timeout` seconds; whether it does."""
        with self._moved:
            return self._moved.wait_for(lambda: (state := self._watched.get(key)) is not None and shows(state), timeout)

    def sweep(self, grace: float = SWEEP_GRACE) -> int:
        """Delete the ledger Leases whose every reservation expired more than `grace` seconds ago
        (LeaseWire.sweep); run by one replica (the status leader). How many were deleted."""
        return self.wire.sweep(self.clock() - grace)

    def read_once(self, keys: Iterable[Key]) -> None:
        """Read each Lease of `keys` this replica has not read yet: called before a lock its
        entries are counted under (the quota counters'), so no request to the API server is made
        while that lock is held."""
        for key in keys:
            self._state(key)

    def refresh(self, keys: tuple[Key, ...]) -> None:
        """Read again each Lease of `keys` whose watch does not show the version this replica
        last read or wrote (or shows none yet)."""
        for key in keys:
            with self._lock:
                cached, watched = self._states.get(key), self._watched.get(key)
            if cached is None or watched is None or watched.version != cached.version:
                self.read_again(key)

    def version(self, key: Key) -> str | None:
        """The version of the Lease of `key` this replica last read or wrote (None: not read yet)."""
        with self._lock:
            state = self._states.get(key)
        return state.version if state is not None else None

    def observe(self, kind: str, lease: dict[str, Any]) -> None:
        """A ledger Lease as the watch shows it."""
        key = lease_key(lease)
        if key is None:
            return
        state = LeaseState("", ()) if kind == "DELETED" else parse_lease(lease)
        with self._moved:
            self._watched[key] = state
            self._moved.notify_all()
        horizon = self.clock()
        asking = frozenset(
            e.key.removeprefix(WANT_PREFIX)
            for e in state.entries
            if e.key.startswith(WANT_PREFIX) and e.expires > horizon
        )
        if self.events is None:
            return
        if asking:
            self.events.publish(SharesWanted(key, asking))
        if kind != "DELETED":
            self.events.publish(LeaseMoved(key))

    def replace_all(self, leases: Iterator[dict[str, Any]]) -> None:
        for lease in leases:
            self.observe("ADDED", lease)

    # -- the Lease ------------------------------------------------------------------------------
    def _state(self, key: Key) -> LeaseState:
        with self._lock:
            state = self._states.get(key)
        if state is None:
            state = self.wire.read(key)
            self._remember(key, state)
        return state

    def _remember(self, key: Key, state: LeaseState) -> None:
        with self._lock:
            self._states[key] = state
            # Each entry's clock starts when it is first read; entries gone from the Lease are forgotten.
            now, before = self.monotonic(), self._first_seen.get(key, {})
            self._first_seen[key] = {(e.key, e.expires): before.get((e.key, e.expires), now) for e in state.entries}
