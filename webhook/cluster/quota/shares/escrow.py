"""Escrow for `consistency: strict` quotas: each replica holds a share of a budget, granted through
the quota's Lease, and admits from it locally, with no write to the API server.

A share is one entry in the Lease, `grant:<replica>.<process>`, whose usage is what it holds:
what is left of its grants, plus what it admitted from them in the last `ttl` seconds (other
replicas may not see those pods in their watch yet, so they stay counted in the entry until
every watch has: the same bound the per-pod entries rest on). Other replicas count the entry
whole; the replica itself leaves it out and counts its admitted pods as local reservations until
its own watch shows them.

A share is granted (refilled) in the replica's turn at the Lease, by compare-and-swap: what is
free is the limit less what the replica's pods counters, the other replicas' entries, its own
reservations and its own share already hold; a grant never takes more than is free, so the
shares and the pods together never pass the limit. Near the limit a share cannot be granted
(nothing is free beyond what the pod needs), and the admission falls back to the exact
per-pod compare-and-swap. A replica that stops leaves its entry: it counts as used until it
expires, `ttl` after the others first read its last version (about 30 s), and is then free.

The one trade-off, in plain words: budget a replica holds and does not use is unavailable to the
others until it gives it back or, if it stopped, until its entry expires. It gives it back once
idle for a sixth of `ttl` (5 s), and at once when another replica asks: one whose admission a
strict budget would deny while other replicas' entries hold some of it writes `want:<replica>`
into the Lease; the holders see it in their Lease watch and write their entries again without
what is left of their shares, and the asker judges the pod again once they have (a second at most).
Asked, a holder also writes what it admitted lately (ITEMIZED pods at most) as the entries the
per-pod path would have written, keyed by pod, and leaves them out of its own: a replica whose
watch shows those pods then counts them once, not again in the holder's entry.
Shares are kept small against what is free (half of it at most, split between the replicas
holding them), are not granted at all near the limit, and go back there: a holder whose Lease
watch shows the budget near the limit, even with its share given back, gives it back unasked
(webhook.cluster.quota.shares.share_writers), so every pod there is judged by the per-pod path, a dry
run (which cannot ask) included.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

from policies import EMPTY, Amount, Quota, Usage, amounts
from webhook.cluster.quota.leases.lease_entries import GRANT_PREFIX
from webhook.events import Events, ShareLow

log = logging.getLogger("gpu_admission.quota")
CHUNK_PODS = 16  # a grant holds what this many pods like the one asking would take ...
CHUNK_SHARE = Fraction(1, 8)  # ... or this share of the limit, whichever is more, and at most a share
# of what is free: half of it, split between this replica and those holding shares already.
ROOM = 64  # shares are granted only while this many more pods like the one asking would fit; nearer
# the limit every admission is judged by the exact per-pod compare-and-swap
ITEMIZED = 256  # at most this many recent admissions written as pods' own entries when asked (below)
Key = tuple[str, str]
Dims = dict[str, Amount]


def grant_key(identity: str) -> str:
    return GRANT_PREFIX + identity


def dims_of(quota: Quota, usage: Usage) -> Dims:
    return {name: held for name, (held, _) in amounts(quota.limits, usage, quota.shared_weight).items()}


def limits_of(quota: Quota) -> Dims:
    return {name: limit for name, (_, limit) in amounts(quota.limits, EMPTY, quota.shared_weight).items()}


def as_usage(dims: Mapping[str, Amount]) -> Usage:
    """The usage whose limited dimensions are `dims` (what a grant entry writes)."""
    slices = {name.split(" ", 1)[1]: int(amount) for name, amount in dims.items() if name.startswith("slices ")}
    return Usage(Fraction(dims.get("gpuEquivalents", 0)), slices, int(dims.get("gpus", 0)), int(dims.get("pods", 0)))


def crowded(quota: Quota, need: Usage, free: Mapping[str, Amount]) -> bool:
    """Near the limit: `free` holds fewer than ROOM more pods like `need`. No share is granted
    there, and what shares hold goes back: every pod is judged by the per-pod path, exactly."""
    return not _fits({name: amount * ROOM for name, amount in dims_of(quota, need).items()}, free)


def _fits(need: Mapping[str, Amount], have: Mapping[str, Amount]) -> bool:
    return all(amount <= have.get(name, 0) for name, amount in need.items())


class Admitted(NamedTuple):
    """A pod admitted from a share: when, what it took of the budget, and the entry the per-pod
    path would have written for it (its key and usage)."""

    when: float
    taken: Dims
    pod: str
    usage: Usage


@dataclass
class Share:
    quota: Quota
    remaining: Dims = field(default_factory=dict)
    recent: deque[Admitted] = field(default_factory=deque)
    written: Dims | None = None  # what the entry said when last written
    written_at: float = 0.0
    last_used: float = 0.0
    itemize: bool = False  # asked for: write recent admissions as the pods' own entries
    granted: Dims = field(default_factory=dict)  # what the last grant added ({}: refill none ahead)
    sized_for: Usage = EMPTY  # the pod the last grant was sized for
    low: bool = False  # under half the last grant left: to be refilled ahead, out of admission

    def age_out(self, now: float, ttl: float) -> None:
        """Admissions older than `ttl` are no longer said: every watch shows their pods by then."""
        while self.recent and self.recent[0].when <= now - ttl:
            self.recent.popleft()

    def give_back(self) -> int:
        """What is left goes back: 1 if there was any (a return), else 0. Refilled only when an
        admission asks again."""
        self.low = False
        if not any(self.remaining.values()):
            return 0
        self.remaining = {name: 0 for name in self.remaining}
        return 1

    def held(self, now: float, ttl: float, leaving: Collection[str] = ()) -> Dims:
        """What the entry must say: what is left, and what was admitted within `ttl` (but the
        pods `leaving` it for entries of their own)."""
        self.age_out(now, ttl)
        total = dict(self.remaining)
        for admitted in self.recent:
            if admitted.pod in leaving:
                continue
            for name, amount in admitted.taken.items():
                total[name] = total.get(name, 0) + amount
        return total


class Escrow:
    """This replica's shares, one per strict budget it has admitted under."""

    def __init__(
        self,
        identity: str,
        ttl: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
        events: Events | None = None,
    ) -> None:
        self.identity = identity
        # Each process its own entry: a container restarted under the same pod name must not take
        # its predecessor's entry for its own (and so stop counting what that one admitted lately).
        self.key = grant_key(f"{identity}.{secrets.token_hex(4)}")
        self.ttl = ttl
        self.monotonic = monotonic
        self.shares: dict[Key, Share] = {}
        self.refills = 0
        self.ahead = 0  # of the refills, those made ahead of need (ShareKeeper), not by an admission
        self.returns = 0
        self.fallbacks = 0
        self.events = events  # ShareLow published to (None: no keeper hears)
        # Pods whose admission from a share this replica wrote as their own entries (when it did):
        # its own reservations count them until its watch shows them, so those entries do not.
        self.itemized: dict[str, float] = {}
        self._lock = threading.Lock()
        self._writing: dict[Key, threading.Lock] = {}

    @contextlib.contextmanager
    def writing(self, key: Key) -> Iterator[None]:
        """Held from reading what this replica's entry of `key` says to recording it written: a
        refill (in the replica's turn) and the keeper (out of it, to answer requests at once)
        take turns here, so neither records what the other's write replaced."""
        with self._lock:
            turn = self._writing.setdefault(key, threading.Lock())
        with turn:
            yield

    def take(self, keys: tuple[Key, ...], quotas: Mapping[Key, Quota], usage: Usage, pod: str) -> bool:
        """Take `usage` from this replica's shares of every budget in `keys`, all or none, for
        the pod whose reservation key is `pod`."""
        with self._lock:
            needs = {}
            for key in keys:
                share = self.shares.get(key)
                quota = quotas.get(key)
                # The same quota object while its policy set is in force: compared only if not.
                if share is None or quota is None or (share.quota is not quota and share.quota != quota):
                    return False
                need = dims_of(quota, usage)
                if not _fits(need, share.remaining):
                    return False
                needs[key] = need
            now = self.monotonic()
            low = []
            for key, need in needs.items():
                share = self.shares[key]
                share.remaining = {n: a - need.get(n, 0) for n, a in share.remaining.items()}
                share.recent.append(Admitted(now, need, pod, usage))
                share.last_used = now
                if not share.low and any(share.remaining.get(n, 0) * 2 < a for n, a in share.granted.items() if a):
                    share.low = True
                    low.append(key)
        if self.events is not None:
            for key in low:
                self.events.publish(ShareLow(key))
        return True

    def low(self) -> list[tuple[Key, Quota, Usage]]:
        """Shares under half their last grant, to refill ahead of need: each with its budget and
        the pod last admitted from it (a grant is sized by the pods asking). Taken: a share is
        flagged again once refilled and drawn down anew."""
        with self._lock:
            found = [(k, s.quota, s.recent[-1].usage) for k, s in self.shares.items() if s.low and s.recent]
            for share in self.shares.values():
                share.low = False
            return found

    def not_ahead(self, key: Key) -> None:
        """No refill ahead for `key` (near the limit, or the Lease contended): the share is not
        flagged again until an admission's own refill grants it."""
        with self._lock:
            share = self.shares.get(key)
            if share is not None:
                share.granted = {}

    def remaining(self, key: Key, quota: Quota) -> Dims:
        with self._lock:
            share = self.shares.get(key)
            return dict(share.remaining) if share is not None and share.quota == quota else {}

    def grant(self, key: Key, quota: Quota, need: Usage, free: Dims, holders: int) -> Dims | None:
        """What to add to the share: a chunk, within a share of what is `free` (`holders`: other
        replicas holding shares); None near the limit, where `free` holds fewer than ROOM more
        pods like `need`: the per-pod path decides there, exactly."""
        if crowded(quota, need, free):
            return None
        wanted = dims_of(quota, need)
        extra: Dims = {}
        for name, limit in limits_of(quota).items():
            room = Fraction(free.get(name, 0)) / (2 * (holders + 1))
            chunk = min(max(Fraction(wanted.get(name, 0) * CHUNK_PODS), limit * CHUNK_SHARE), room)
            extra[name] = chunk if name == "gpuEquivalents" else int(chunk)  # counts are whole
        return extra if _fits(wanted, extra) else None

    def held_with(self, key: Key, quota: Quota, extra: Dims) -> Dims:
        """What the entry says once `extra` is added (admissions meanwhile move budget from what
        is left to what was admitted: the sum stays)."""
        with self._lock:
            share = self.shares.get(key)
            held = share.held(self.monotonic(), self.ttl) if share is not None else {}
        return {name: held.get(name, 0) + extra.get(name, 0) for name in held.keys() | extra.keys()}

    def holding(self, key: Key) -> tuple[Quota, Usage] | None:
        """The budget of this replica's share of `key` and the pod it was sized for, if its entry
        says more than the pods' own entries would: some of it left, or admissions from it not yet
        itemized. A share spent to nothing still says what it admitted lately, whole, beside the
        pods other watches show: near the limit that is counted twice until itemized."""
        with self._lock:
            share = self.shares.get(key)
            if share is None or not (any(share.remaining.values()) or share.recent):
                return None
            return share.quota, share.sized_for

    def granted(self, key: Key, quota: Quota, extra: Dims, need: Usage = EMPTY) -> None:
        with self._lock:
            share = self.shares.get(key)
            if share is None or share.quota != quota:  # what was admitted stays said until it ages out
                recent = share.recent if share is not None else deque()
                share = self.shares[key] = Share(quota, {name: 0 for name in extra}, recent)
            share.remaining = {name: share.remaining.get(name, 0) + amount for name, amount in extra.items()}
            share.granted, share.low, share.sized_for = extra, False, need
            share.written = share.held(self.monotonic(), self.ttl)
            share.written_at = share.last_used = self.monotonic()
            self.refills += 1

    def entries(self, key: Key) -> tuple[Dims | None, dict[str, Usage]]:
        """What this replica's entry in the Lease of `key` must say now (None: no share), and,
        once another replica asked, its recent admissions (ITEMIZED at most) as the entries the
        per-pod path would have written: each replica leaves out those whose pods its watch
        shows, where the share's entry counted them whole, beside the pods, for `ttl`."""
        with self._lock:
            share = self.shares.get(key)
            if share is None:
                return None, {}
            now = self.monotonic()
            share.age_out(now, self.ttl)
            pods = {a.pod: a.usage for a in list(share.recent)[:ITEMIZED]} if share.itemize else {}
            # Marked before the write: from the moment the Lease holds them, this replica's own
            # reservations are what count them here (unwritten, the marks match no entry).
            self.itemized.update(dict.fromkeys(pods, now))
            return share.held(now, self.ttl, pods), pods

    def due(self, now: float) -> list[Key]:
        """Shares whose entry should be written again: what it must say changed (admissions aged
        out, an idle share to give back), or it is a third of `ttl` old (so others keep it live)."""
        found = []
        with self._lock:
            self.itemized = {pod: when for pod, when in self.itemized.items() if when > now - self.ttl}
            for key, share in self.shares.items():
                if now - share.last_used >= self.ttl / 6:
                    self.returns += share.give_back()  # idle
                stale = share.held(now, self.ttl) != share.written or now - share.written_at >= self.ttl / 3
                if stale or share.itemize:
                    found.append(key)
        return found

    def rewritten(self, key: Key, written: Dims, itemized: Collection[str] = ()) -> None:
        """The entry was written as `entries` said (`written`), with the pods `itemized` in entries
        of their own. What was written is kept as written: a share given back meanwhile makes
        the entry due again."""
        with self._lock:
            share = self.shares.get(key)
            if share is not None:
                if itemized:
                    share.recent = deque(a for a in share.recent if a.pod not in itemized)
                share.itemize = False
                share.written = written
                share.written_at = self.monotonic()
                if not any(share.written.values()):
                    del self.shares[key]  # nothing held, nothing to say: the entry is gone

    def give_back(self, key: Key) -> None:
        """Another replica asked for this budget: what is left of the share goes back, and what
        was admitted from it lately is to be written as the pods' own entries."""
        with self._lock:
            share = self.shares.get(key)
            if share is not None:
                share.itemize = bool(share.recent)
                self.returns += share.give_back()

    def forget(self, keep: Callable[[Key, Quota], bool]) -> None:
        """A new policy set: shares of budgets it changed are given up (their entries rewritten)."""
        with self._lock:
            for key, share in self.shares.items():
                if not keep(key, share.quota):
                    share.remaining = {name: 0 for name in share.remaining}

    def holdings(self) -> dict[Key, Usage]:
        with self._lock:
            return {key: as_usage(share.held(self.monotonic(), self.ttl)) for key, share in self.shares.items()}
