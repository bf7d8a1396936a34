"""The strict quota ledger as stored: one Lease per (policy, scope) in the webhook's namespace,
its entries (pods' reservations, replicas' shares, requests for shares back) in one annotation,
written compactly; pure reading and writing of that text, no API calls
(webhook.cluster.quota.leases.shared_quota makes those)."""

from __future__ import annotations

import base64
import hashlib
import math
import re
import uuid
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

import orjson

from policies import Usage

LEDGER_LABEL = "gpu-admission.io/quota-ledger"
RESERVATIONS = "gpu-admission.io/reservations"
# Entries holding a replica's share (webhook.cluster.quota.shares.escrow), not a pod's reservation.
GRANT_PREFIX = "grant:"
WANT_PREFIX = "want:"  # a replica asking the others to give their shares back: it holds nothing
Key = tuple[str, str]  # (policy, scope)


@dataclass(frozen=True, slots=True)
class Entry:
    key: str
    expires: float
    usage: Usage

    def to_json(self) -> list[Any]:
        u = self.usage
        shared = str(u.shared_equivalents)
        return [self.key, round(self.expires, 3), str(u.gpu_equivalents), dict(u.slices), u.gpus, u.pods, shared]

    @classmethod
    def from_json(cls, raw: list[Any]) -> Entry:
        key, expires, equivalents, slices, gpus, pods, *rest = raw
        shared = Fraction(rest[0]) if rest else Fraction(0)  # entries written before shares were kept apart
        usage = Usage(Fraction(equivalents), dict(slices), int(gpus), int(pods), shared)
        return cls(str(key), float(expires), usage)


@dataclass(frozen=True, slots=True)
class LeaseState:
    version: str  # "" when the Lease does not exist yet
    entries: tuple[Entry, ...] = ()


def lease_name(key: Key) -> str:
    policy, scope = key
    digest = hashlib.sha256(f"{policy}\0{scope}".encode()).hexdigest()[:12]
    slug = re.sub(r"[^a-z0-9-]+", "-", policy.lower()).strip("-")[:40]
    return f"gpu-admission-quota-{slug}-{digest}".replace("--", "-")


def lease_key(lease: dict[str, Any]) -> Key | None:
    """The (policy, scope) a ledger Lease is for, from the annotations it is written with."""
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    policy, scope = annotations.get("gpu-admission.io/policy"), annotations.get("gpu-admission.io/scope")
    if not isinstance(policy, str) or not isinstance(scope, str):
        return None
    return policy, "" if scope == "(policy-wide)" else scope


def parse_lease(lease: dict[str, Any]) -> LeaseState:
    metadata = lease.get("metadata") or {}
    text = (metadata.get("annotations") or {}).get(RESERVATIONS) or "[]"
    try:
        entries = decode_entries(text)
    except (ValueError, TypeError, ZeroDivisionError, KeyError, IndexError):
        entries = ()  # a hand-edited Lease: its reservations are lost, the next write starts afresh
    return LeaseState(str(metadata.get("resourceVersion") or ""), entries)


# The ledger's annotation, compact: an object's annotations may hold 256 KiB in all (the API server
# answers 422 past that), and a list of whole entries (~95 bytes each) filled it at about 2,700
# reservations. Version 2 writes each distinct usage once and each entry as one short string,
# "<key> <expires, whole seconds> <usage index>", a pod's uid as 22 base64url characters after a
# '~': about 39 bytes an entry, so 5,000 reservations take about 195 KB.
def encode_entries(entries: list[Entry] | tuple[Entry, ...]) -> str:
    usages: dict[str, int] = {}
    rows = []
    for entry in entries:
        usage = orjson.dumps(entry.to_json()[2:]).decode()
        index = usages.setdefault(usage, len(usages))
        rows.append(f"{_short_key(entry.key)} {math.ceil(entry.expires)} {index}")
    table = [orjson.loads(usage) for usage in usages]
    return orjson.dumps({"v": 2, "usages": table, "entries": rows}).decode()


def decode_entries(text: str) -> tuple[Entry, ...]:
    raw = orjson.loads(text)
    if isinstance(raw, list):  # version 1, as replicas before version 2 wrote it
        return tuple(Entry.from_json(item) for item in raw)
    usages = raw["usages"]
    entries = []
    for row in raw["entries"]:
        key, expires, index = row.split(" ")
        entries.append(Entry.from_json([_long_key(key), float(expires), *usages[int(index)]]))
    return tuple(entries)


def _short_key(key: str) -> str:
    try:
        canonical = str(uuid.UUID(key)) == key
    except ValueError:
        canonical = False
    if not canonical:
        return key  # namespace/name of a pod without a uid: no spaces in Kubernetes names
    return "~" + base64.urlsafe_b64encode(uuid.UUID(key).bytes).decode().rstrip("=")


def _long_key(key: str) -> str:
    if key.startswith("~") and len(key) == 23:
        return str(uuid.UUID(bytes=base64.urlsafe_b64decode(key[1:] + "==")))
    return key


Mark = tuple[str, float, str]  # an entry as written: key, expires, usage


class Asked(NamedTuple):
    """A request for shares back, written: the Lease, the request's entry, the shares asked about."""

    key: Key
    want: str
    marks: frozenset[Mark]


def mark(entry: Entry) -> Mark:
    """An entry as written: a holder that writes its entry again writes another mark."""
    return entry.key, entry.expires, repr(entry.usage)
