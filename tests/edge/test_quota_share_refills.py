"""Shares refilled ahead of need (webhook.cluster.quota.shares.escrow): an admission that draws a share
under half its last grant flags it, once, for the keeper to refill out of admission; a share
given back, or refused a refill ahead, is not flagged again until an admission's own refill
grants it. And the mean pod a share is sized for before any pod asks (policies' Usage.per_pod)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from policies import Usage
from policies.model.policy import Limits, Quota
from webhook.cluster.quota.shares.escrow import Escrow
from webhook.events import Events, ShareLow

KEY = ("big", "team-a")
QUOTA = Quota(limits=Limits(pods=1000))
POD = Usage(pods=1)


def escrow_with_share(pods: int) -> tuple[Escrow, list[tuple[str, str]]]:
    events = Events()
    escrow = Escrow("replica-1", events=events)
    flagged: list[tuple[str, str]] = []
    events.subscribe(ShareLow, lambda low: flagged.append(low.key))
    escrow.granted(KEY, QUOTA, {"pods": pods})
    return escrow, flagged


def take(escrow: Escrow, count: int, start: int = 0) -> list[bool]:
    return [escrow.take((KEY,), {KEY: QUOTA}, POD, f"uid-{start + i}") for i in range(count)]


def test_a_share_drawn_under_half_its_grant_is_flagged_once_for_a_refill_ahead():
    escrow, flagged = escrow_with_share(10)
    assert all(take(escrow, 5)) and flagged == []  # half left: not yet
    assert all(take(escrow, 3, 5)) and flagged == [KEY]  # under half: once, not per admission
    assert escrow.low() == [(KEY, QUOTA, POD)]  # with the budget and the pod to size the grant for
    assert escrow.low() == []  # taken
    escrow.granted(KEY, QUOTA, {"pods": 10})  # refilled: 12 left of a grant of 10, drawn down anew
    assert all(take(escrow, 8, 8)) and flagged == [KEY, KEY]


def test_a_share_given_back_is_not_refilled_ahead():
    escrow, flagged = escrow_with_share(10)
    assert all(take(escrow, 6))
    escrow.give_back(KEY)  # another replica asked for it
    assert escrow.low() == []
    assert not any(take(escrow, 1, 6))  # nothing left: the admission asks for its own refill


def test_a_share_refused_a_refill_ahead_is_not_flagged_again_until_an_admission_refills_it():
    escrow, flagged = escrow_with_share(100)
    assert all(take(escrow, 51))
    assert escrow.low() == [(KEY, QUOTA, POD)]
    escrow.not_ahead(KEY)  # near the limit, or the Lease contended
    assert all(take(escrow, 40, 51)) and flagged == [KEY]
    escrow.granted(KEY, QUOTA, {"pods": 20})  # an admission's own refill
    assert all(take(escrow, 20, 91)) and flagged == [KEY, KEY]


def test_a_share_spent_to_nothing_is_held_until_what_it_admitted_is_written_as_the_pods_own():
    """Its entry still says the pods it admitted lately, whole, beside the pods other watches
    show: near the limit its keeper must give that back too, or a dry run counts them twice."""
    escrow, _ = escrow_with_share(2)
    assert all(take(escrow, 2)) and escrow.holding(KEY) is not None
    escrow.give_back(KEY)  # near the limit (ShareKeeper): itemized
    held, pods = escrow.entries(KEY)
    assert sorted(pods) == ["uid-0", "uid-1"] and not any(held.values())
    escrow.rewritten(KEY, held, pods)
    assert escrow.holding(KEY) is None


counts = st.integers(min_value=0, max_value=50)


@given(
    pods=st.integers(min_value=1, max_value=40),
    gpus=counts,
    slices=st.dictionaries(st.sampled_from(["1g.10gb", "3g.40gb"]), st.integers(1, 90)),
    equivalents=st.fractions(min_value=0, max_value=30, max_denominator=7),
)
def test_the_mean_pod_times_the_pods_covers_what_they_hold_in_every_dimension(pods, gpus, slices, equivalents):
    held = Usage(Fraction(equivalents), slices, gpus, pods, Fraction(equivalents) / 2)
    mean = held.per_pod()
    assert mean.pods == 1
    covered = mean.times(pods)
    assert covered.gpus >= held.gpus and covered.gpu_equivalents >= held.gpu_equivalents
    assert covered.shared_equivalents >= held.shared_equivalents
    assert all(covered.slices.get(name, 0) >= count for name, count in held.slices.items())
