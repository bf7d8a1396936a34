"""Who may renew certificates now: the holder of a Lease, as long as it keeps renewing it. Pure:
the I/O side reads the Lease, asks here, and writes the claim with compare-and-swap."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    renewed: dt.datetime
    duration: dt.timedelta

    def expired(self, now: dt.datetime) -> bool:
        return now >= self.renewed + self.duration


def may_lead(record: LeaseRecord | None, me: str, now: dt.datetime) -> bool:
    """No Lease, an abandoned one, or our own: this replica may take (or keep) it."""
    return record is None or not record.holder or record.holder == me or record.expired(now)
