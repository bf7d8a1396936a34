"""Reservations: usage held for pods admitted but not yet seen in the pod watch.

A reservation is released when its pod shows up (matched by uid, by name, or by the prefix of a
generateName), or when it expires.

An admitted UPDATE holds the pod as it stands after it (a gated pod's node selector widened off
split nodes, its labels moved into a budget), under the pod's key and UPDATE, until it expires;
what it adds to a budget is only what the watch does not show the pod holding there yet
(`outstanding`), so it counts until the updated pod is seen, and again if an older event of the
pod comes after, never twice; the watch showing the pod as the UPDATE left it ends it. One that
grows no budget adds nothing now, and is kept all the same (dormant: no budget reads it) until a
new policy set charges the pod as updated.

Totals are kept per (policy, scope), so reading what a budget has reserved costs the same with
one reservation or thousands (an UPDATE's few are worked out when read). Not thread-safe on its own: the
counting (webhook.cluster.quota.counting.pod_counting) holds it under its lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, replace
from typing import Any

from policies import EMPTY, Charges, PodFacts, Usage, moved

UPDATE = "/update"  # the key suffix of what an UPDATE grows a pod to


def updated_pod(key: str) -> str | None:
    """The pod key an UPDATE's reservation or Lease entry is for; None for a CREATE's."""
    return key[: -len(UPDATE)] if key.endswith(UPDATE) else None


@dataclass(frozen=True, slots=True)
class PodRef:
    """The pod under admission. The validating webhook sees its final name and uid."""

    namespace: str
    name: str
    generate_name: str = ""
    uid: str = ""

    @property
    def key(self) -> str:
        return self.uid or f"{self.namespace}/{self.name or self.generate_name + '*'}"

    @property
    def by_prefix(self) -> bool:
        return not self.uid and not self.name and bool(self.generate_name)

    def claimed_by(self, namespace: str, name: str) -> bool:
        if namespace != self.namespace:
            return False
        return name == self.name if self.name else bool(self.generate_name) and name.startswith(self.generate_name)


@dataclass(frozen=True, slots=True)
class AsUpdated:
    """An admitted UPDATE's pod as it stands after it: the budgets it is in (`charges`) and what
    charging reads of it (`facts`; None: it holds nothing, or cannot be read)."""

    charges: Charges = ()
    facts: PodFacts | None = None


NOT_READ = AsUpdated()  # a CREATE's, a dry run's, a denial's: nothing read again


@dataclass(frozen=True, slots=True)
class Reservation:
    pod: PodRef
    charges: Charges  # local ones only: strict charges live in the shared Lease
    usage: Usage
    expires: float
    made: float = 0.0
    strict: Charges = ()  # the budgets whose shared Lease holds an entry for the pod
    raw: Mapping[str, Any] | None = None  # the pod as admitted: a new policy set charges it again
    # An UPDATE's: the pod as charging reads it after the update; the watch showing it so ends it.
    facts: PodFacts | None = None
    # An UPDATE's that grows no budget of the set it was judged by, over a pod no other UPDATE
    # holds: it adds nothing to a budget until a new set (or new namespace labels) charges it
    # again, so no budget reads it till then.
    dormant: bool = False

    def charged(self, charges: Charges | None) -> Reservation:
        """The reservation charged to `charges` (None: as it is)."""
        return self if charges is None or charges == self.charges else replace(self, charges=charges)


class Reservations:
    def __init__(self) -> None:
        self._by_key: dict[str, Reservation] = {}
        self._totals: dict[tuple[str, str], Usage] = {}
        self._expiry: deque[tuple[float, str]] = deque()
        self._prefixed: set[str] = set()  # reservations of pods known only by generateName
        self._checked: set[str] = set()  # asked of the API server already (forged-review sweep)
        # UPDATE reservations, out of the totals, by budget: what one adds is worked out when read
        self._updates: dict[tuple[str, str], dict[str, Reservation]] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def total(self, key: tuple[str, str]) -> Usage:
        return self._totals.get(key, EMPTY)

    def recharge(
        self, charges: Callable[[Mapping[str, Any] | None, Charges], Charges | None], namespaces: Container[str] = ()
    ) -> int:
        """Charge the reservations (of `namespaces`, or all) again, as `charges` says now of each
        pod as kept, but its strict budgets (None: as they are); what they hold moves between
        budgets. Returns how many moved."""
        moved = 0
        for reservation in list(self._by_key.values()):
            if namespaces and reservation.pod.namespace not in namespaces:
                continue
            fresh = reservation.charged(charges(reservation.raw, reservation.strict))
            if fresh is not reservation:
                moved += 1
            if fresh is not reservation or reservation.dormant:
                self.add(replace(fresh, dormant=False))  # read by its budgets from now on
        return moved

    def updates(self, charge: tuple[str, str]) -> list[Reservation]:
        """The UPDATE reservations charged to a budget (their part is worked out by the caller)."""
        return list(self._updates.get(charge, {}).values())

    def add(self, reservation: Reservation) -> None:
        self.release(reservation.pod.key)
        self._by_key[reservation.pod.key] = reservation
        if reservation.pod.by_prefix:
            self._prefixed.add(reservation.pod.key)
        self._expiry.append((reservation.expires, reservation.pod.key))
        if updated_pod(reservation.pod.key) is not None:
            for key in () if reservation.dormant else reservation.charges:
                self._updates.setdefault(key, {})[reservation.pod.key] = reservation
            return
        for key in reservation.charges:
            self._totals[key] = self._totals.get(key, EMPTY) + reservation.usage

    def release(self, key: str) -> None:
        reservation = self._by_key.pop(key, None)
        if reservation is None:
            return
        self._prefixed.discard(key)
        self._checked.discard(key)
        if updated_pod(key) is not None:
            for charge in reservation.charges:
                held = self._updates.get(charge)
                if held is not None and held.pop(key, None) is not None and not held:
                    del self._updates[charge]
            return
        for charge in reservation.charges:
            left = self._totals.get(charge, EMPTY) - reservation.usage
            if left.holds_anything:
                self._totals[charge] = left
            else:
                self._totals.pop(charge, None)

    def expire(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] <= now:
            expires, key = self._expiry.popleft()
            reservation = self._by_key.get(key)
            if reservation is not None and reservation.expires == expires:
                self.release(key)

    def claim(self, namespace: str, name: str, uid: str) -> None:
        """The pod is in the watch now: its own counters take over from its reservation."""
        for key in (uid, f"{namespace}/{name}"):
            if key in self._by_key:
                self.release(key)
                return
        for key in self._prefixed:
            if self._by_key[key].pod.claimed_by(namespace, name):
                self.release(key)
                return

    def unconfirmed(self, made_before: float, limit: int) -> list[Reservation]:
        """Up to `limit` reservations older than `made_before` whose pod nobody has looked for yet
        (they are marked looked for). Only ones with a name: the validating webhook sees it."""
        found: list[Reservation] = []
        for key, reservation in self._by_key.items():
            if len(found) >= limit:
                break
            if key not in self._checked and reservation.made <= made_before and reservation.pod.name:
                self._checked.add(key)
                found.append(reservation)
        return found

    def unchecked(self, key: str) -> None:
        """The look failed (API server away): look again later."""
        self._checked.discard(key)

    def get(self, key: str) -> Reservation | None:
        return self._by_key.get(key)

    def release_seen(self, seen_uids: Container[str]) -> None:
        """After a relist: pods listed by uid take over from their reservations."""
        for key in [k for k, r in self._by_key.items() if r.pod.uid in seen_uids]:
            self.release(key)

    def shown(self, uid: str, facts: PodFacts | None) -> None:
        """The watch shows pod `uid` as `facts`: an UPDATE's reservation that held the pod so is
        done (wherever the pod runs now). Compared by what charging reads, under the needs in
        force: a pod read under other needs is not the same, and its reservation runs its time."""
        if facts is None or not uid:  # most pods' events: nothing an UPDATE could have held
            return
        reservation = self._by_key.get(uid + UPDATE)
        if reservation is not None and reservation.facts is not None and _same(facts, reservation.facts):
            self.release(reservation.pod.key)

    def updated_uids(self) -> list[str]:
        """The pods (by uid) an UPDATE's reservation holds."""
        return [pod for key in self._by_key if (pod := updated_pod(key)) is not None]


def _same(shown: PodFacts, held: PodFacts) -> bool:
    """Whether charging reads the two alike, wherever each runs."""
    placed = moved(shown, held.node)
    return placed is held or (placed is not None and placed.shape == held.shape)
