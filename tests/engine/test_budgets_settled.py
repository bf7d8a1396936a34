"""A pod is judged once; its budgets are settled on the counts as they stand when settled.

The webhook runs the engine outside its counters' lock (`Engine.judge`) and, under the lock,
only settles the budgets (`Decision.settle`), again on each strict retry. So whatever the counts
did between the two, the settled decision is the one `validate` gives on the counts it settled on.
"""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.judge.ledger import Ledger
from policies.judge.quota import NoUsage
from policies.review.request import Operation, RequestInfo
from tests.support.builders import engine_from, gpu_container, pod, policy

ENGINE = engine_from(
    policy(
        "team",
        """
match: {namespaces: [team-a]}
mig: {gpuModels: [A100-80GB]}
quota: {limits: {pods: 3, slices: {1g.10gb: 4}}, perPod: {slices: {1g.10gb: 2}}}
rules:
  - {name: labelled, expression: "has(object.metadata.labels)", message: needs labels, action: warn}
""",
    ),
    policy("cluster", "quota: {scope: policy, limits: {gpuEquivalents: '1'}}"),
)


def slices(count: int, name: str = "p") -> dict:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/mig-1g.10gb": str(count)}}}
    found = pod(container, namespace="team-a")
    found["metadata"]["name"] = name
    return found


def counts(held: int) -> Ledger:
    """The counters holding `held` one-slice pods."""
    return Ledger.from_pods([slices(1, f"r{i}") for i in range(held)], ENGINE.policy_set)


class Unread:
    """A UsageSource that fails the test if read."""

    def usage(self, policy, scope):
        raise AssertionError(f"counts of {policy.name} read while judging")

    def shared_claims(self, policy, scope):
        raise AssertionError(f"claims of {policy.name} read while judging")


def test_judging_a_pod_reads_no_counts_and_leaves_each_budget_to_settle():
    judged = ENGINE.judge(slices(1), Unread())
    assert [(policy.name, scope) for policy, _, scope in judged.budgets.quotas] == [("cluster", ""), ("team", "team-a")]
    assert judged.charges == (("cluster", ""), ("team", "team-a"))
    settled = judged.settle(counts(3))
    assert not settled.allowed and settled.budgets is None
    assert "pods 3 + 1 exceeds 3" in settled.message
    assert settled.settle(Unread()) is settled  # nothing left to settle: read no more


@settings(max_examples=60, deadline=None)
@given(asked=st.integers(1, 3), before=st.integers(0, 6), after=st.integers(0, 6))
def test_a_pod_judged_on_some_counts_and_settled_on_others_is_what_validate_says_on_those(asked, before, after):
    candidate = slices(asked)
    judged = ENGINE.judge(candidate, counts(before))
    assert judged.settle(counts(after)) == ENGINE.validate(candidate, counts(after))


def test_a_per_pod_cap_and_the_rules_stand_whatever_the_counts():
    judged = ENGINE.judge(slices(3), Unread())
    for held in (0, 5):
        settled = judged.settle(counts(held))
        assert "over the per-pod cap of 2" in settled.message
        assert any(v.rule == "labelled" for v in settled.verdicts)


def test_an_update_is_judged_once_and_settled_on_what_it_adds():
    # A gated pod holding a whole GPU, narrowed onto split nodes: the GPU becomes a slice, which
    # the update adds to a budget it did not touch.
    engine = engine_from(policy("slices", "match: {namespaces: [team-a]}\nquota: {limits: {slices: {1g.10gb: 1}}}\n"))
    gated = pod(gpu_container(), namespace="team-a", schedulingGates=[{"name": "wait"}])
    narrowed = copy.deepcopy(gated)
    narrowed["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
    update = RequestInfo("team-a", Operation.UPDATE, old_object=gated)
    judged = engine.judge(narrowed, Unread(), update)
    assert judged.budgets.added.slices == {"1g.10gb": 1}
    assert judged.settle(NoUsage()).allowed
    full = Ledger.from_pods([slices(1)], engine.policy_set)
    settled = judged.settle(full)
    assert settled == engine.validate(narrowed, full, update)
    assert not settled.allowed and "slices" in settled.message
    unchanged = engine.judge(gated, Unread(), RequestInfo("team-a", Operation.UPDATE, old_object=gated))
    assert unchanged.budgets is None  # an update that adds nothing meets no budget
