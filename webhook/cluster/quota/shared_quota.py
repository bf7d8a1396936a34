"""Reservations of `consistency: strict` quotas, shared by every replica through the API server.

One Lease per (policy, scope) in the webhook's namespace holds the reservations of pods admitted
but not yet seen in the pod watch, in an annotation. A replica admits against its own pod
counters plus the Lease's reservations it has not yet seen as pods, and records its reservation
by replacing the Lease at the resourceVersion it read: if another replica wrote in between, the
API server answers 409 Conflict, the Lease is read again and the pod judged again. So replicas
never overshoot together. Entries stay until they expire (a replica whose watch lags still
counts them), and each replica skips the ones whose pods its own watch already counts.

Within a replica, admissions under one Lease take turns (`turn`): they would only conflict with
each other. An entry expires `ttl` after *this* replica first read it, on its own monotonic
clock: the `expires` written in it is for people, since comparing another replica's clock with
ours would let a fast clock drop reservations that are still live.

The cost: one write to the API server per admission under a strict quota (and a read after each
conflict), against none on the `local` path.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import orjson
from kubernetes.client.exceptions import ApiException

from policies import EMPTY, Usage
from webhook.cluster.quota.ledger import (
    GRANT_PREFIX,
    LEDGER_LABEL,
    RESERVATIONS,
    WANT_PREFIX,
    Entry,
    Key,
    LeaseState,
    encode_entries,
    lease_key,
    lease_name,
    parse_lease,
)
from webhook.cluster.quota.reservations import PodRef, updated_pod
from webhook.metrics import STRICT_CONFLICTS

SWEEP_GRACE = 300.0  # seconds past the last reservation's expiry before its Lease is deleted
log = logging.getLogger("gpu_admission.quota")
TIMEOUT = (1.0, 2.0)  # connect, read: well inside the webhook's own timeout
ASK_ATTEMPTS = 5  # writes of a request for shares back, each on the Lease as read after a conflict


class LedgerUnavailable(RuntimeError):
    """The Lease could not be read or written: a strict quota cannot be judged, so it denies."""


class SharedReservations:
    def __init__(
        self,
        api: Any,
        namespace: str,
        identity: str,
        ttl: float = 30.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api  # a CoordinationV1Api
        self.namespace = namespace
        self.identity = identity
        self.ttl = ttl
        self.clock = clock  # only for the `expires` people read in an entry
        self.monotonic = monotonic
        self.conflicts = 0
        self._states: dict[Key, LeaseState] = {}
        self._first_seen: dict[Key, dict[tuple[str, float], float]] = {}  # (pod, expires) -> when we read it
        self._turns: dict[Key, threading.Lock] = {}
        self._lock = threading.Lock()
        # What the Lease watch shows (webhook.cluster.wiring): it never replaces what this replica
        # read or wrote (a late event would take it back a version); it wakes those waiting on a
        # Lease, and tells the shares when another replica asks for them back (`on_wanted`).
        self._watched: dict[Key, LeaseState] = {}
        self._moved = threading.Condition(self._lock)
        self.on_wanted: Callable[[Key, frozenset[str]], None] = lambda key, asking: None
        self._asked: dict[Key, set[Mark]] = {}  # the shares asked back last, per Lease
        self._open: dict[Key, Asked] = {}  # requests written and not yet closed, per Lease

    def pending(self, key: Key, outstanding: Callable[[str, Usage, Usage | None], Usage]) -> Usage:
        """Reservations in the Lease (as last read) that have not expired, each at what it adds
        beyond what this replica's watch shows (`outstanding`: nothing for a pod seen; an
        UPDATE's entry beyond the pod's, or its CREATE's entry in the same Lease)."""
        now = self.monotonic()
        alive = {entry.key: entry.usage for entry in self._state(key).entries if self._alive(key, entry, now)}
        total = EMPTY
        for entry_key, usage in alive.items():
            total = total + outstanding(entry_key, usage, alive.get(updated_pod(entry_key) or ""))
        return total

    @contextlib.contextmanager
    def turn(self, keys: tuple[Key, ...], timeout: float) -> Iterator[bool]:
        """This replica's turn at the Leases of `keys` (taken in one order: no deadlock); yields
        False if it did not come within `timeout` seconds."""
        with self._lock:
            locks = [self._turns.setdefault(key, threading.Lock()) for key in sorted(set(keys))]
        deadline = self.monotonic() + timeout
        taken: list[threading.Lock] = []
        try:
            for lock in locks:
                if not lock.acquire(timeout=max(0.0, deadline - self.monotonic())):
                    yield False
                    return
                taken.append(lock)
            yield True
        finally:
            for lock in reversed(taken):
                lock.release()

    def _alive(self, key: Key, entry: Entry, now: float) -> bool:
        with self._lock:
            first = self._first_seen.setdefault(key, {}).setdefault((entry.key, entry.expires), now)
        return now < first + self.ttl

    def reserve(self, keys: tuple[Key, ...], pod: PodRef, usage: Usage) -> bool:
        """Add the pod's reservation to every Lease; False if one moved since it was read (it is
        read again: judge the pod again and retry)."""
        return all(self.put(key, pod.key, usage) for key in keys)

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
            written = self._write(key, state.version, entries)
        except ApiException as error:
            if error.status not in (404, 409):
                raise LedgerUnavailable(f"{lease_name(key)}: {error.status} {error.reason}") from None
            self.conflicts += 1
            STRICT_CONFLICTS.inc()
            self._remember(key, self._read(key))
            return False
        except Exception as error:  # refused, reset, timed out
            raise LedgerUnavailable(f"{lease_name(key)}: {type(error).__name__}") from None
        self._remember(key, written)
        return True

    def holders(self, key: Key, own: str) -> int:
        """Replicas other than `own` holding a share of the budget (its entries `grant:<replica>`)."""
        now = self.monotonic()
        return sum(
            1
            for entry in self._state(key).entries
            if entry.key.startswith(GRANT_PREFIX) and entry.key != own and self._alive(key, entry, now)
        )

    def withdraw(self, keys: tuple[Key, ...], pod: PodRef) -> None:
        """Take the pod's entry out of every Lease (its pod was never created). Best effort: an
        entry that stays expires with its TTL."""
        for key in keys:
            for _ in range(3):
                try:
                    state = self._read(key)
                    entries = [e for e in state.entries if e.key != pod.key]
                    if len(entries) == len(state.entries) or not state.version:
                        break
                    self._remember(key, self._write(key, state.version, entries))
                    break
                except ApiException as error:
                    if error.status != 409:
                        break
                except Exception:  # refused, reset, timed out: it expires anyway
                    break

    def sweep(self, grace: float = SWEEP_GRACE) -> int:
        """Delete the ledger Leases whose every reservation expired more than `grace` seconds ago
        by their own `expires` (wall clock: the grace covers replicas' skew), each on the version
        read (a reservation written meanwhile makes the delete a 409, and the Lease stays). A
        replica still holding a deleted version gets a 404 on its next write, reads again and
        creates it afresh. Returns how many were deleted; run by one replica (the status leader)."""
        listed = self.api.list_namespaced_lease(
            self.namespace, label_selector=f"{LEDGER_LABEL}=true", _preload_content=False, _request_timeout=TIMEOUT
        )
        deleted = 0
        horizon = self.clock() - grace
        for lease in orjson.loads(listed.data).get("items") or []:
            state = parse_lease(lease)
            if any(entry.expires > horizon for entry in state.entries):
                continue
            name = lease["metadata"]["name"]
            try:
                self.api.delete_namespaced_lease(
                    name,
                    self.namespace,
                    body={"preconditions": {"resourceVersion": state.version}},
                    _request_timeout=TIMEOUT,
                )
                deleted += 1
            except ApiException as error:
                if error.status not in (404, 409):
                    raise
        if deleted:
            log.info("strict quota leases deleted", extra={"fields": {"deleted": deleted}})
        return deleted

    def refresh(self, keys: tuple[Key, ...]) -> None:
        """Read again each Lease of `keys` whose watch does not show the version this replica
        last read or wrote (or shows none yet)."""
        for key in keys:
            with self._lock:
                cached, watched = self._states.get(key), self._watched.get(key)
            if cached is None or watched is None or watched.version != cached.version:
                self._remember(key, self._read(key))

    # -- asking for shares back ----------------------------------------------------------------
    def shares_held(self, key: Key, own: str) -> tuple[Entry, ...]:
        """Other replicas' share entries in the Lease as last read that hold something."""
        now = self.monotonic()
        return tuple(
            entry
            for entry in self._state(key).entries
            if entry.key.startswith(GRANT_PREFIX)
            and entry.key != own
            and not entry.usage.is_zero
            and self._alive(key, entry, now)
        )

    def ask_back(self, key: Key, own: str) -> Asked | None:
        """Ask the replicas holding shares of `key` to give them back: an entry `want:<own>` they
        see in their Lease watch. In this replica's turn at `key`. None, asking nothing, when the
        shares held are those asked about last time: what they hold then is pods admitted
        lately (written since as the pods' own entries), or a holder did not answer in time."""
        want = WANT_PREFIX + own.removeprefix(GRANT_PREFIX)
        for _ in range(ASK_ATTEMPTS):  # a conflict reads the Lease again: the shares held may have moved
            asked = {_mark(e) for e in self.shares_held(key, own)}
            with self._lock:
                if (open_ask := self._open.get(key)) is not None:
                    return open_ask  # asked already, not answered yet: this pod waits for that answer too
                if not asked or self._asked.get(key) == asked:
                    return None
            if self.put(key, want, EMPTY):
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
        deadline = self.monotonic() + timeout
        with self._moved:
            self._moved.wait_for(
                lambda: self._answered(asked.key, asked.want, asked.marks), max(0.0, deadline - self.monotonic())
            )

    def version(self, key: Key) -> str | None:
        """The version of the Lease of `key` this replica last read or wrote (None: not read yet)."""
        with self._lock:
            state = self._states.get(key)
        return state.version if state is not None else None

    def close_ask(self, asked: Asked) -> None:
        """Read the Lease as the holders left it and take the request out, once for every pod
        waiting on it (the others find it closed, and the Lease read). In this replica's turn."""
        key = asked.key
        with self._lock:
            if self._open.get(key) is not asked:
                return
        try:
            self._remember(key, self._read(key))  # the holders wrote meanwhile
            for _ in range(3):  # taken out at once (a conflict reads again); were it left, it would expire with the TTL
                if self.put(key, asked.want, None):
                    break
        finally:
            with self._lock:
                self._open.pop(key, None)

    def _answered(self, key: Key, want: str, asked: frozenset[Mark]) -> bool:
        """The Lease watch shows the request, and none of the share entries asked about as it was:
        each holder has written its own again. (Before the watch shows the request, what it shows
        may predate the holders' entries: that is no answer.)"""
        state = self._watched.get(key)
        if state is None or not any(e.key == want for e in state.entries):
            return False
        return not asked & {_mark(e) for e in state.entries if e.key.startswith(GRANT_PREFIX)}

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
        if asking:
            self.on_wanted(key, asking)

    def replace_all(self, leases: Iterator[dict[str, Any]]) -> None:
        for lease in leases:
            self.observe("ADDED", lease)

    # -- the Lease ------------------------------------------------------------------------------
    def _state(self, key: Key) -> LeaseState:
        with self._lock:
            state = self._states.get(key)
        if state is None:
            state = self._read(key)
            self._remember(key, state)
        return state

    def _remember(self, key: Key, state: LeaseState) -> None:
        with self._lock:
            self._states[key] = state
            # Each entry's clock starts when it is first read; entries gone from the Lease are forgotten.
            now, before = self.monotonic(), self._first_seen.get(key, {})
            self._first_seen[key] = {(e.key, e.expires): before.get((e.key, e.expires), now) for e in state.entries}

    def _read(self, key: Key) -> LeaseState:
        try:
            response = self.api.read_namespaced_lease(
                lease_name(key), self.namespace, _preload_content=False, _request_timeout=TIMEOUT
            )
        except ApiException as error:
            if error.status == 404:
                return LeaseState("")
            raise LedgerUnavailable(f"{lease_name(key)}: {error.status} {error.reason}") from None
        except Exception as error:  # refused, reset, timed out
            raise LedgerUnavailable(f"{lease_name(key)}: {type(error).__name__}") from None
        return parse_lease(orjson.loads(response.data))

    def _write(self, key: Key, version: str, entries: list[Entry]) -> LeaseState:
        policy, scope = key
        metadata: dict[str, Any] = {
            "name": lease_name(key),
            "namespace": self.namespace,
            "labels": {LEDGER_LABEL: "true"},
            "annotations": {
                "gpu-admission.io/policy": policy,
                "gpu-admission.io/scope": scope or "(policy-wide)",
                RESERVATIONS: encode_entries(entries),
            },
        }
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata}
        body["spec"] = {"holderIdentity": self.identity}
        if version:
            metadata["resourceVersion"] = version
            response = self.api.replace_namespaced_lease(lease_name(key), self.namespace, body, _preload_content=False)
        else:
            response = self.api.create_namespaced_lease(self.namespace, body, _preload_content=False)
        return parse_lease(orjson.loads(response.data))


Mark = tuple[str, float, str]  # an entry as written: key, expires, usage


class Asked(NamedTuple):
    """A request for shares back, written: the Lease, the request's entry, the shares asked about."""

    key: Key
    want: str
    marks: frozenset[Mark]


def _mark(entry: Entry) -> Mark:
    return entry.key, entry.expires, repr(entry.usage)
