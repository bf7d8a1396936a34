"""Who may lead now (renew certificates, report policy status): the holder of a Lease, as long as
it keeps renewing it. Pure: the I/O side (certs.lease) reads the Lease, asks here, and writes
the claim with compare-and-swap.

Expiry is judged as client-go's leader election judges it: by when *this* replica last saw the
Lease change, on its own monotonic clock, never by comparing the holder's `renewTime` with the
local wall clock. A replica whose clock runs 45 s fast would otherwise take over a Lease its
holder renewed a second ago.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    renewed: str  # renewTime as the holder wrote it: compared for change only, never with a clock
    duration: float  # leaseDurationSeconds


@dataclass(frozen=True)
class Observed:
    record: LeaseRecord
    since: float  # this replica's monotonic clock when it first read this very record


def observe(previous: Observed | None, record: LeaseRecord | None, now: float) -> Observed | None:
    """What is known of the Lease after reading it at `now`: a record unchanged since the last
    read keeps the time it was first seen."""
    if record is None:
        return None
    if previous is not None and previous.record == record:
        return previous
    return Observed(record, now)


def may_lead(observed: Observed | None, me: str, now: float) -> bool:
    """No Lease, an abandoned one (no holder), our own, or one left unrenewed for its whole
    duration as this replica measured it: this replica may take (or keep) it."""
    if observed is None:
        return True
    record = observed.record
    return not record.holder or record.holder == me or now >= observed.since + record.duration
