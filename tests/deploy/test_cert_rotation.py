"""Certificate rotation over years of simulated time: the served certificate always chains to a CA
the API servers already trust, and nothing is ever served expired."""

from __future__ import annotations

import datetime as dt

import pytest

from certs.rotation import Action, CertState, RotationPolicy, Validity, bundle, next_action

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CA_LIFE = dt.timedelta(days=365)
SERVING_LIFE = dt.timedelta(days=90)
POLICY = RotationPolicy(propagation=dt.timedelta(hours=2))


def issue(now: dt.datetime, life: dt.timedelta, ceiling: dt.datetime | None = None) -> Validity:
    end = now + life if ceiling is None else min(now + life, ceiling)
    return Validity(now, end)


def apply(state: CertState, action: Action, now: dt.datetime) -> CertState:
    """What the I/O side does for each action (here on validity periods only)."""
    if action is Action.BOOTSTRAP:
        ca = issue(now, CA_LIFE)
        return CertState(current_ca=ca, serving=issue(now, SERVING_LIFE, ca.not_after), serving_from_current_ca=True)
    assert state.current_ca is not None
    if action is Action.RENEW_SERVING:
        serving = issue(now, SERVING_LIFE, state.current_ca.not_after)
        return CertState(**{**state.__dict__, "serving": serving, "serving_from_current_ca": True})
    if action is Action.ADD_NEXT_CA:
        return CertState(**{**state.__dict__, "next_ca": issue(now, CA_LIFE), "next_ca_published": now})
    if action is Action.SWITCH_TO_NEXT_CA:
        assert state.next_ca is not None
        return CertState(
            current_ca=state.next_ca,
            serving=issue(now, SERVING_LIFE, state.next_ca.not_after),
            serving_from_current_ca=True,
            retired_ca=state.current_ca,
            retired_at=now,
        )
    if action is Action.DROP_RETIRED_CA:
        return CertState(**{**state.__dict__, "retired_ca": None, "retired_at": None})
    return state


def test_an_empty_state_bootstraps():
    assert next_action(CertState(), START) is Action.BOOTSTRAP


def test_a_fresh_pair_needs_nothing():
    state = apply(CertState(), Action.BOOTSTRAP, START)
    assert next_action(state, START + dt.timedelta(days=1), POLICY) is Action.NOTHING


def test_a_serving_certificate_is_renewed_with_a_third_of_its_life_left():
    state = apply(CertState(), Action.BOOTSTRAP, START)
    assert next_action(state, START + dt.timedelta(days=59), POLICY) is Action.NOTHING
    assert next_action(state, START + dt.timedelta(days=61), POLICY) is Action.RENEW_SERVING


def test_the_next_ca_is_published_before_it_signs_anything():
    state = apply(CertState(), Action.BOOTSTRAP, START)
    near_end = START + CA_LIFE - dt.timedelta(days=59)
    state = apply(state, Action.RENEW_SERVING, near_end)
    assert next_action(state, near_end, POLICY) is Action.ADD_NEXT_CA
    state = apply(state, Action.ADD_NEXT_CA, near_end)
    assert len(bundle(state)) == 2
    assert next_action(state, near_end + dt.timedelta(hours=1), POLICY) is Action.NOTHING
    assert next_action(state, near_end + dt.timedelta(hours=2), POLICY) is Action.SWITCH_TO_NEXT_CA


def test_the_retired_ca_stays_in_the_bundle_until_the_new_certificate_has_propagated():
    state = CertState(
        current_ca=issue(START, CA_LIFE),
        serving=issue(START, SERVING_LIFE),
        serving_from_current_ca=True,
        retired_ca=issue(START - CA_LIFE, CA_LIFE + dt.timedelta(days=30)),
        retired_at=START,
    )
    assert next_action(state, START + dt.timedelta(hours=1), POLICY) is Action.NOTHING
    assert next_action(state, START + dt.timedelta(hours=2), POLICY) is Action.DROP_RETIRED_CA


@pytest.mark.parametrize("step_hours", [1, 7, 24], ids=["hourly", "every-7h", "daily"])
def test_five_years_of_rotation_never_serve_an_untrusted_or_expired_certificate(step_hours):
    state = apply(CertState(), Action.BOOTSTRAP, START)
    trusted_since = {state.current_ca: START}
    now, end = START, START + dt.timedelta(days=5 * 365)
    seen: set[Action] = set()
    while now < end:
        now += dt.timedelta(hours=step_hours)
        action = next_action(state, now, POLICY)
        seen.add(action)
        assert action is not Action.BOOTSTRAP, f"lost the chain at {now}"
        state = apply(state, action, now)
        for ca in bundle(state):
            trusted_since.setdefault(ca, now)
        assert state.serving.valid_at(now) and state.current_ca.valid_at(now)
        assert state.current_ca in bundle(state)
        assert now - trusted_since[state.current_ca] >= POLICY.propagation or state.current_ca == next(
            iter(trusted_since)
        )
    assert {Action.RENEW_SERVING, Action.ADD_NEXT_CA, Action.SWITCH_TO_NEXT_CA, Action.DROP_RETIRED_CA} <= seen
