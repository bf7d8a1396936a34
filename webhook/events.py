"""What happens in a replica that other parts react to: one typed event each, and `Events`, the
hub that hands an event to the parts subscribed to its type.

The parts that publish are given the hub when they are built (the caches the watches feed, the
holder a new policy set is swapped into, the policy store); the parts that react are named where
the replica is built (webhook.replica, webhook.cluster.live for the counters,
webhook.cluster.wiring for the rest), so one place reads as who hears what. Subscriptions are
made while the replica is built, before any watch runs; a reactor runs in the publisher's thread,
in the order subscribed, and what it raises reaches the publisher (a watch logs it and lists
again), unless the publisher says otherwise (the policy store: loading goes on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from policies import PolicyProblem


@dataclass(frozen=True, slots=True)
class PolicySetInForce:
    """A new policy set is in force: pods are charged by it, ladders and the audit follow it."""


@dataclass(frozen=True, slots=True)
class NamespaceLabelsChanged:
    """The labels of `namespaces` changed (or they came or went): namespaceSelectors read them."""

    namespaces: frozenset[str]


@dataclass(frozen=True, slots=True)
class ClaimsChanged:
    """What a ResourceClaim or ResourceClaimTemplate asks changed: pods naming it are charged by it."""


@dataclass(frozen=True, slots=True)
class PodGroupsChanged:
    """What a PodGroup (or Workload) shares with its pods changed: they are charged again."""


@dataclass(frozen=True, slots=True)
class DeviceClassesChanged:
    """A DeviceClass changed: what claims and extended resources can select through it."""


@dataclass(frozen=True, slots=True)
class SourceProblems:
    """A policy source's problems changed, or it was seen first (`problems` empty: it is clean):
    logged, counted, and told to the source (its status)."""

    source: str
    problems: list[PolicyProblem]


@dataclass(frozen=True, slots=True)
class SourceLoaded:
    """Every file of a policy source loaded (`texts`: file and text): its last good versions,
    to persist where the source lives."""

    source: str
    texts: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class SourceRetried:
    """A policy source was loaded again with no change of its own (a name it was kept out for is
    free now): `problems` it has now."""

    source: str
    problems: list[PolicyProblem]


@dataclass(frozen=True, slots=True)
class ShareLow:
    """Admissions drew this replica's share of the strict budget `key` under half its last grant:
    refilled ahead of need (webhook.cluster.quota.shares)."""

    key: tuple[str, str]


@dataclass(frozen=True, slots=True)
class SharesWanted:
    """The Lease watch shows replicas (`asking`: their entries' names) asking for the budget of
    `key` back from the replicas holding shares of it."""

    key: tuple[str, str]
    asking: frozenset[str]


@dataclass(frozen=True, slots=True)
class LeaseMoved:
    """The Lease watch shows the strict budget `key`'s Lease written (by any replica)."""

    key: tuple[str, str]


Event = (
    PolicySetInForce
    | NamespaceLabelsChanged
    | ClaimsChanged
    | PodGroupsChanged
    | DeviceClassesChanged
    | SourceProblems
    | SourceLoaded
    | SourceRetried
    | ShareLow
    | SharesWanted
    | LeaseMoved
)
E = TypeVar(
    "E",
    PolicySetInForce,
    NamespaceLabelsChanged,
    ClaimsChanged,
    PodGroupsChanged,
    DeviceClassesChanged,
    SourceProblems,
    SourceLoaded,
    SourceRetried,
    ShareLow,
    SharesWanted,
    LeaseMoved,
)


class Events:
    """Reactors by event type. Subscribed while the replica is built; published from any thread
    (a publish reads one tuple, replaced whole by a subscription)."""

    def __init__(self) -> None:
        self._reactors: dict[type, tuple[Callable[..., object], ...]] = {}

    def subscribe(self, kind: type[E], reactor: Callable[[E], object]) -> None:
        self._reactors[kind] = (*self._reactors.get(kind, ()), reactor)

    def publish(self, event: Event, failed: Callable[[], object] | None = None) -> None:
        """Each reactor to `event`'s type, in turn. With `failed`, what a reactor raises is not
        the publisher's: `failed` runs in its handler (to log it) and the next reactor runs."""
        for reactor in self._reactors.get(type(event), ()):
            if failed is None:
                reactor(event)
                continue
            try:
                reactor(event)
            except Exception:
                failed()

    def silence(self, kind: type[Event]) -> None:
        """No part reacts to `kind` from now on (a replica told to say nothing more)."""
        self._reactors.pop(kind, None)

    def reactors(self, kind: type[Event]) -> int:
        """How many parts react to `kind` (what a test of the wiring reads)."""
        return len(self._reactors.get(kind, ()))
