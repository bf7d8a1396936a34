"""When to renew what: pure expiry logic for self-managed webhook certificates. Time comes in.

The API server trusts what `caBundle` says, and a changed bundle takes a while to reach every
API server. So a CA is rolled over in steps, never in one: publish the next CA beside the
current one, wait for it to propagate, switch serving certificates to it, then, once every
replica serves the new certificate, drop the old CA from the bundle.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass


class Action(enum.Enum):
    NOTHING = "nothing"
    BOOTSTRAP = "bootstrap"  # no usable CA or serving certificate: make both now
    RENEW_SERVING = "renew-serving"  # a new serving certificate from the current CA
    ADD_NEXT_CA = "add-next-ca"  # make the next CA and publish it beside the current one
    SWITCH_TO_NEXT_CA = "switch-to-next-ca"  # the next CA becomes current and signs a new serving certificate
    DROP_RETIRED_CA = "drop-retired-ca"  # the old CA leaves the bundle


@dataclass(frozen=True)
class Validity:
    not_before: dt.datetime
    not_after: dt.datetime

    def valid_at(self, now: dt.datetime) -> bool:
        return self.not_before <= now < self.not_after

    def left_fraction(self, now: dt.datetime) -> float:
        return (self.not_after - now) / (self.not_after - self.not_before)


@dataclass(frozen=True)
class CertState:
    current_ca: Validity | None = None
    serving: Validity | None = None
    serving_from_current_ca: bool = False
    next_ca: Validity | None = None
    next_ca_published: dt.datetime | None = None
    retired_ca: Validity | None = None
    retired_at: dt.datetime | None = None


@dataclass(frozen=True)
class RotationPolicy:
    serving_renew_left: float = 1 / 3  # renew a serving certificate with a third of its life left
    ca_renew_before: dt.timedelta = dt.timedelta(days=60)
    propagation: dt.timedelta = dt.timedelta(hours=1)  # for a bundle change to reach every API server


def next_action(state: CertState, now: dt.datetime, policy: RotationPolicy = RotationPolicy()) -> Action:
    ca, serving = state.current_ca, state.serving
    if ca is None or serving is None or not ca.valid_at(now) or not serving.valid_at(now):
        return Action.BOOTSTRAP
    if not state.serving_from_current_ca or serving.not_after > ca.not_after:
        return Action.RENEW_SERVING
    if state.retired_ca is not None and state.retired_at is not None:
        return Action.DROP_RETIRED_CA if now - state.retired_at >= policy.propagation else Action.NOTHING
    if state.next_ca is not None and state.next_ca_published is not None:
        if now - state.next_ca_published >= policy.propagation:
            return Action.SWITCH_TO_NEXT_CA
        return Action.RENEW_SERVING if _serving_due(serving, ca, now, policy) else Action.NOTHING
    if ca.not_after - now <= policy.ca_renew_before:
        return Action.ADD_NEXT_CA
    return Action.RENEW_SERVING if _serving_due(serving, ca, now, policy) else Action.NOTHING


def _serving_due(serving: Validity, ca: Validity, now: dt.datetime, policy: RotationPolicy) -> bool:
    return serving.left_fraction(now) <= policy.serving_renew_left and serving.not_after < ca.not_after


def bundle(state: CertState) -> tuple[Validity, ...]:
    """The CAs `caBundle` must hold now: the current one, plus the next or the retired one."""
    found = (state.current_ca, state.next_ca, state.retired_ca)
    return tuple(ca for ca in found if ca is not None)
