"""The budget law, over whole histories: for any sequence of CREATEs, UPDATEs (a gated pod
narrowing its node selector onto split nodes, or widening it; any pod relabelled into or out of
a budget that selects pods by label), pods finishing and deleted, watch
events arriving late, relists and policy reloads, no admission leaves a budget over its limit.

Only a reload may find a budget over its limit (a new policy that charges pods the old one did
not); an admission then may not add to it. Driven through the validating view as the API server
calls it, with the replica's own counters fed by the events the watch would deliver.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from policies.judge.usage import Usage
from tests.support.builders import engine_from, pod, policy
from tests.support.server_harness import admission_review
from webhook.serving import admission
from webhook.serving.review import parse_review
from webhook.state import EngineHolder

pytestmark = pytest.mark.slow

LIMIT = Fraction(2)
PODS = 4
NAMESPACE_WIDE = policy(
    "budget", f'match: {{namespaces: [team]}}\nquota: {{limits: {{gpuEquivalents: "{LIMIT}", pods: {PODS}}}}}'
)
LABELLED = policy(
    "budget",
    "match: {namespaces: [team], podSelector: {matchLabels: {tier: gpu}}}\n"
    f'quota: {{limits: {{gpuEquivalents: "{LIMIT}", pods: {PODS}}}}}',
)
ENGINES = {"namespace-wide": engine_from(NAMESPACE_WIDE), "labelled": engine_from(LABELLED)}
SPLIT_NODE = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
ASKS = st.sampled_from(
    [
        {"nvidia.com/gpu": "1"},
        {"nvidia.com/mig-1g.10gb": "1"},
        {"nvidia.com/mig-1g.10gb": "3"},
        {"nvidia.com/mig-3g.40gb": "1"},
    ]
)


class BudgetHistory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.holder = EngineHolder(clock=lambda: 0.0)  # reservations outlive the history: no expiry
        self.holder.swap(ENGINES["namespace-wide"])
        self.stored: dict[str, dict[str, Any]] = {}  # what the API server holds
        self.pending: list[tuple[str, dict[str, Any]]] = []  # watch events not delivered yet
        self.count = 0
        self.over_by_reload = False

    def charged(self) -> Usage:
        engine = self.holder.engine
        assert engine is not None
        found = engine.policy_set.by_name("budget")
        assert found is not None
        return self.holder.budgets.usage(found, "team")

    def truth(self) -> Usage:
        """What the budget holds once the watch has shown every pod the API server has: a new
        policy set may find it over the limit by pods admitted under the old one."""
        fresh = EngineHolder()
        fresh.swap(self.holder.engine)
        fresh.view.counting.replace_all(copy.deepcopy(list(self.stored.values())))
        found = fresh.engine.policy_set.by_name("budget")
        return fresh.budgets.usage(found, "team")

    def within(self, usage: Usage) -> bool:
        return usage.gpu_equivalents <= LIMIT and usage.pods <= PODS

    @staticmethod
    def no_fuller_where_over(before: Usage, after: Usage) -> bool:
        """The law, dimension by dimension as ResourceQuota reads it (only what an admission grows
        can deny it): each dimension within its limit, or (over it by a reload) no fuller."""
        pairs = ((after.gpu_equivalents, before.gpu_equivalents, LIMIT), (after.pods, before.pods, PODS))
        return all(now <= limit or now <= was for now, was, limit in pairs)

    def judged(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> bool:
        before = self.charged()
        options: dict[str, Any] = {"uid": obj["metadata"]["uid"], "namespace": "team"}
        if old is not None:
            options.update(operation="UPDATE", old=old)
        allowed = admission.validate(self.holder, parse_review(admission_review(obj, **options))).allowed
        after = self.charged()
        assert self.no_fuller_where_over(before, after), (before, after)
        return allowed

    @rule(asks=ASKS, labelled=st.booleans(), split=st.booleans(), gated=st.booleans())
    def create(self, asks: dict[str, str], labelled: bool, split: bool, gated: bool) -> None:
        self.count += 1
        name = f"p{self.count}"
        obj = pod({"name": "main", "image": "cuda", "resources": {"limits": asks}}, namespace="team")
        obj["metadata"].update(name=name, uid=f"uid-{name}", labels={"tier": "gpu"} if labelled else None)
        if split:
            obj["spec"]["nodeSelector"] = dict(SPLIT_NODE)
        if gated:
            obj["spec"]["schedulingGates"] = [{"name": "example.com/queue"}]
        if self.judged(obj):
            self.stored[name] = obj
            self.pending.append(("ADDED", copy.deepcopy(obj)))

    @rule(data=st.data())
    def narrow_or_widen_a_gated_pod(self, data: st.DataObject) -> None:
        gated = sorted(n for n, p in self.stored.items() if p["spec"].get("schedulingGates"))
        if not gated:
            return
        name = data.draw(st.sampled_from(gated))
        old = self.stored[name]
        new = copy.deepcopy(old)
        if "nodeSelector" in new["spec"]:
            del new["spec"]["nodeSelector"]
        else:
            new["spec"]["nodeSelector"] = dict(SPLIT_NODE)
        if data.draw(st.booleans()):
            del new["spec"]["schedulingGates"]  # released: the scheduler may bind it now
        if self.judged(new, old):
            self.stored[name] = new
            self.pending.append(("MODIFIED", copy.deepcopy(new)))

    @rule(data=st.data())
    def relabel_a_pod(self, data: st.DataObject) -> None:
        """A running pod's labels are its writer's: one moved into the labelled budget is new to it."""
        if not self.stored:
            return
        name = data.draw(st.sampled_from(sorted(self.stored)))
        old = self.stored[name]
        new = copy.deepcopy(old)
        new["metadata"]["labels"] = None if old["metadata"].get("labels") else {"tier": "gpu"}
        if self.judged(new, old):
            self.stored[name] = new
            self.pending.append(("MODIFIED", copy.deepcopy(new)))

    @rule(data=st.data(), phase=st.sampled_from(["Succeeded", "Failed", None]))
    def finish_or_delete(self, data: st.DataObject, phase: str | None) -> None:
        if not self.stored:
            return
        name = data.draw(st.sampled_from(sorted(self.stored)))
        if phase is None:
            self.pending.append(("DELETED", self.stored.pop(name)))
            return
        self.stored[name] = {**self.stored[name], "status": {"phase": phase}}
        self.pending.append(("MODIFIED", copy.deepcopy(self.stored[name])))

    @rule()
    def deliver_a_watch_event(self) -> None:
        if self.pending:
            self.holder.view.counting.observe(*self.pending.pop(0))

    @rule()
    def relist(self) -> None:
        self.pending.clear()  # the watch starts again from the list
        self.holder.view.counting.replace_all(copy.deepcopy(list(self.stored.values())))

    @rule(which=st.sampled_from(sorted(ENGINES)))
    def reload(self, which: str) -> None:
        self.holder.swap(ENGINES[which])
        self.holder.view.policy_set_changed()
        if not self.holder.view.counting.recharge():
            self.relist()
        self.over_by_reload = not (self.within(self.charged()) and self.within(self.truth()))

    @invariant()
    def the_budget_holds_whatever_the_watch_has_delivered(self) -> None:
        usage, truth = self.charged(), self.truth()
        assert usage.pods >= 0 and usage.gpu_equivalents >= 0
        if self.over_by_reload and self.within(usage) and self.within(truth):
            self.over_by_reload = False
        # What the API server holds stays within the limit. The replica's own view may count a pod
        # as the watch delivers it late, in a state an update has since undone, until the next
        # event: over the truth, on the safe side (it may deny what fits, never admit what does not).
        assert self.within(truth) or self.over_by_reload, truth


BudgetHistory.TestCase.settings = settings(
    max_examples=200, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_no_history_of_admissions_events_and_reloads_overruns_a_budget = BudgetHistory.TestCase


class Draws:
    """Answers for a rule's `data.draw`, in order (a history written out by hand)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def draw(self, strategy: Any) -> Any:
        return self.answers.pop(0)


def test_an_update_that_grows_a_pod_holds_the_growth_until_the_watch_shows_the_updated_pod():
    # A gated whole GPU on split nodes is charged a slice (1/7); widened, it becomes a whole GPU.
    # Admissions made before the watch shows the widened pod must see the growth already.
    history = BudgetHistory()
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=True, gated=True)
    history.narrow_or_widen_a_gated_pod(Draws("p1", False))
    assert history.charged().gpu_equivalents == 1
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=False, gated=False)
    history.create({"nvidia.com/mig-3g.40gb": "1"}, labelled=False, split=False, gated=False)
    assert sorted(history.stored) == ["p1", "p2"]  # the third would overrun the budget
    while history.pending:
        history.deliver_a_watch_event()
        history.the_budget_holds_whatever_the_watch_has_delivered()
    assert history.charged().gpu_equivalents == 2


def test_pods_admitted_under_the_old_policy_set_are_charged_by_the_new_one_before_the_watch_shows_them():
    history = BudgetHistory()
    history.reload("labelled")  # charges only pods labelled tier=gpu
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=False, gated=False)
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=False, gated=False)
    history.reload("namespace-wide")  # now both count, though the watch has shown neither
    assert history.charged().gpu_equivalents == 2
    history.create({"nvidia.com/gpu": "1"}, labelled=True, split=False, gated=False)
    assert sorted(history.stored) == ["p1", "p2"]


def test_a_gated_pod_may_grow_its_gpus_within_their_limit_while_a_reload_left_pods_over_theirs():
    # ResourceQuota's reading: only what an update grows can deny it.
    history = BudgetHistory()
    history.reload("labelled")
    for _ in range(PODS):  # 4 labelled pods, a slice each (a whole GPU on split nodes): 4/7, pods at 4
        history.create({"nvidia.com/gpu": "1"}, labelled=True, split=True, gated=True)
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=True, gated=True)  # not charged yet
    history.reload("namespace-wide")  # now all five count: pods 5 of 4, 5/7 GPU-equivalents of 2
    assert history.over_by_reload and history.charged().pods == PODS + 1
    history.narrow_or_widen_a_gated_pod(Draws("p1", False))  # off split nodes: 1/7 -> 1 (11/7 of 2)
    assert history.stored["p1"]["spec"].get("nodeSelector") is None
    assert history.charged().gpu_equivalents == Fraction(11, 7)


def test_a_watch_event_delivered_after_its_update_was_undone_may_overcount_but_never_admits_past_the_limit():
    history = BudgetHistory()
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=True, gated=True)  # p1: 1/7
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=False, gated=True)  # p2: 1
    history.deliver_a_watch_event()
    history.deliver_a_watch_event()
    history.narrow_or_widen_a_gated_pod(Draws("p1", False))  # p1 widened: 1 (2 in all)
    history.narrow_or_widen_a_gated_pod(Draws("p1", False))  # and narrowed back: 1/7 (8/7)
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=True, gated=False)  # p3: 1/7 (9/7)
    assert sorted(history.stored) == ["p1", "p2", "p3"]
    history.deliver_a_watch_event()  # p1 widened, stale by now: the view counts 1 for it
    history.the_budget_holds_whatever_the_watch_has_delivered()
    while history.pending:
        history.deliver_a_watch_event()
        history.the_budget_holds_whatever_the_watch_has_delivered()
    assert history.charged().gpu_equivalents == history.truth().gpu_equivalents == Fraction(9, 7)


def test_pods_relabelled_where_no_budget_grew_are_charged_as_relabelled_by_the_next_policy_set():
    # Relabelled under a namespace-wide budget, the pods grow nothing and are held already; the
    # labelled budget a reload brings in must see them as they stand, not as first admitted.
    history = BudgetHistory()
    for name in ("p1", "p2"):
        history.create({"nvidia.com/gpu": "1"}, labelled=False, split=False, gated=False)
        history.relabel_a_pod(Draws(name))
    history.reload("labelled")
    assert history.charged() == history.truth()
    history.create({"nvidia.com/gpu": "1"}, labelled=True, split=False, gated=False)
    assert sorted(history.stored) == ["p1", "p2"]


def test_a_gated_pod_widened_where_no_budget_charged_it_is_charged_widened_by_the_next_policy_set():
    history = BudgetHistory()
    history.reload("labelled")
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=True, gated=True)  # charged nothing: 1/7
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=True, gated=True)
    history.narrow_or_widen_a_gated_pod(Draws("p1", False))  # off split nodes: a whole GPU, still unlabelled
    history.reload("namespace-wide")
    assert history.charged().gpu_equivalents == Fraction(8, 7)
    history.create({"nvidia.com/gpu": "1"}, labelled=False, split=False, gated=False)
    assert sorted(history.stored) == ["p1", "p2"]
    history.deliver_a_watch_event()  # p1 as created: the update still holds what it grew to
    assert history.charged().gpu_equivalents == Fraction(8, 7)


def test_the_watch_showing_a_pod_as_its_update_left_it_ends_the_updates_reservation():
    # Held until then, dormant where it grows no budget: no admission reads it meanwhile.
    history = BudgetHistory()
    history.reload("labelled")  # the labels are read: the pod before and after its update differ
    history.create({"nvidia.com/gpu": "1"}, labelled=True, split=False, gated=False)
    history.relabel_a_pod(Draws("p1"))  # out of the budget: it grows none
    reservations = history.holder.view.counting._reservations
    assert reservations.updated_uids() == ["uid-p1"] and reservations.get("uid-p1/update").dormant
    history.deliver_a_watch_event()  # p1 as created: not as the update left it
    assert reservations.updated_uids() == ["uid-p1"]
    history.deliver_a_watch_event()  # p1 relabelled
    assert reservations.updated_uids() == []
