"""The strict quota ledger's annotation stays within the API server's limit for an object's
annotations (256 KiB in all) at 5,000 reservations, and reads back exactly, old format included."""

from __future__ import annotations

import math
import uuid
from fractions import Fraction

import orjson
from hypothesis import given
from hypothesis import strategies as st

from policies.judge.usage import Usage
from webhook.cluster.quota.leases.lease_entries import Entry, decode_entries, encode_entries

ANNOTATIONS_LIMIT = 256 * 1024


def entry(key: str, expires: float = 1_764_791_234.0, usage: Usage | None = None) -> Entry:
    return Entry(key, expires, usage or Usage(Fraction(1, 7), {"1g.10gb": 1}, 0, 1, Fraction(0)))


def test_five_thousand_reservations_fit_in_an_objects_annotations_with_room_to_spare():
    entries = [entry(str(uuid.uuid4()), usage=Usage(Fraction(i % 3, 7), {"1g.10gb": i % 3}, 0, 1)) for i in range(5000)]
    text = encode_entries(entries)
    assert len(text.encode()) < 0.8 * ANNOTATIONS_LIMIT
    assert decode_entries(text) == tuple(entries)


def test_a_ledger_written_by_an_earlier_version_reads_the_same():
    old = [entry(str(uuid.uuid4()), 1_764_791_234.5), entry("ml/p*", 1_764_791_240.0)]
    assert decode_entries(orjson.dumps([e.to_json() for e in old]).decode()) == tuple(old)


KEYS = st.one_of(st.uuids().map(str), st.from_regex(r"[a-z0-9-]{1,20}/[a-z0-9.-]{0,40}\*?", fullmatch=True))


@given(st.lists(st.tuples(KEYS, st.integers(0, 2**40), st.integers(0, 8)), max_size=30))
def test_every_reservation_reads_back_as_written(rows):
    entries = [entry(key, float(expires), Usage(Fraction(n, 7), {"1g.10gb": n}, n, 1)) for key, expires, n in rows]
    assert decode_entries(encode_entries(entries)) == tuple(
        Entry(e.key, float(math.ceil(e.expires)), e.usage) for e in entries
    )
