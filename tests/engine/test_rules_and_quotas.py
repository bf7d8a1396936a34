"""Rules per action and quotas per dimension, at the limit and one over, with exact fractions."""

import copy
from fractions import Fraction

import pytest

from policies.judge.ledger import Ledger
from policies.judge.quota import NoUsage
from policies.model.cel import CelEvaluationError, CelInput, compile_expression
from policies.model.policy import Action
from tests.support.builders import engine_from, gpu_container, plain_container, pod, policy

MIG = "mig: {gpuModels: [A100-80GB]}\n"


def slice_container(name="main", profile="1g.10gb", count="1"):
    return {"name": name, "image": "cuda", "resources": {"limits": {f"nvidia.com/mig-{profile}": count}}}


def slice_pod(*containers, namespace="team-a", **kwargs):
    return pod(*(containers or (slice_container(),)), namespace=namespace, **kwargs)


def quota_engine(limits, extra=""):
    return engine_from(policy("team-a", f"match: {{namespaces: [team-a, team-b]}}\n{MIG}quota:\n{limits}{extra}"))


def ledger_of(engine, *pods):
    return Ledger.from_pods(pods, engine.policy_set)


def rule_engine(action, expression="has(object.metadata.labels) && 'team' in object.metadata.labels", extra=""):
    return engine_from(
        policy(
            "labels",
            f"""
rules:
  - name: require-team-label
    expression: "{expression}"
    message: GPU pods need a team label
    action: {action}
{extra}""",
        )
    )


def test_a_deny_rule_denies_with_its_message_policy_rule_object_and_path():
    decision = rule_engine("deny").validate(slice_pod(), NoUsage())
    assert not decision.allowed
    assert decision.message == (
        "GPU pods need a team label (policy labels) [rule require-team-label, spec.rules[0].expression, Pod team-a/p]"
    )


def test_a_passing_rule_says_nothing():
    decision = rule_engine("deny").validate(slice_pod(labels={"team": "a"}), NoUsage())
    assert decision.allowed and not decision.verdicts


def test_a_warn_rule_allows_with_a_warning():
    decision = rule_engine("warn").validate(slice_pod(), NoUsage())
    assert decision.allowed
    assert decision.warnings[0].startswith("GPU pods need a team label (policy labels)")


def test_an_audit_rule_allows_and_records_an_audit_annotation():
    decision = rule_engine("audit").validate(slice_pod(), NoUsage())
    assert decision.allowed and not decision.warnings
    assert decision.audit_annotations == {"labels.require-team-label": "GPU pods need a team label (policy labels)"}


def test_a_message_expression_gives_the_message():
    engine = rule_engine("deny", extra="    messageExpression: \"'pod ' + object.metadata.name + ' has no team'\"")
    assert "pod p has no team" in engine.validate(slice_pod(), NoUsage()).message


def test_a_rule_that_fails_to_evaluate_denies_naming_the_rule():
    decision = rule_engine("warn", expression="object.metadata.labels.team == 'a'").validate(slice_pod(), NoUsage())
    assert not decision.allowed
    assert "could not be evaluated" in decision.message and "rule require-team-label" in decision.message


def test_rules_see_the_request():
    engine = rule_engine("deny", expression="request.namespace == 'team-a'")
    assert engine.validate(slice_pod(), NoUsage()).allowed


def test_non_gpu_pods_are_not_judged():
    assert rule_engine("deny").validate(pod(plain_container()), NoUsage()).allowed


def test_an_unservable_gpu_request_is_denied_with_its_reason():
    engine = engine_from(policy("gpu", MIG))
    decision = engine.validate(pod(gpu_container(), annotations={"mig-profile": "1g.5gb"}), NoUsage())
    assert not decision.allowed
    assert "unknown MIG profile '1g.5gb' on A100-80GB" in decision.message
    assert "spec.containers[0].resources" in decision.message


def test_a_single_strategy_pod_pinned_to_another_product_is_denied_after_mutation():
    engine = engine_from(policy("s", "mig: {strategy: single, gpuModels: [B200-180GB], defaultProfile: 1g.23gb}"))
    pinned = pod(gpu_container(), nodeSelector={"nvidia.com/gpu.product": "NVIDIA-B200"})
    mutated = engine.mutate(pinned).object
    decision = engine.validate(mutated, NoUsage())
    assert not decision.allowed and "selects NVIDIA-B200" in decision.message


# -- quotas ------------------------------------------------------------------------------------


def test_seven_one_g_slices_are_exactly_one_gpu_equivalent():
    engine = quota_engine('  limits: {gpuEquivalents: "1"}\n')
    ledger = ledger_of(engine, *[slice_pod() for _ in range(6)])
    assert engine.validate(slice_pod(), ledger).allowed
    ledger = ledger_of(engine, *[slice_pod() for _ in range(7)])
    decision = engine.validate(slice_pod(), ledger)
    assert not decision.allowed
    assert decision.denials[0].message == "team-a: gpuEquivalents 1 + 1/7 exceeds 1 (policy team-a)"


def test_the_denial_reads_usage_request_and_limit_as_fractions():
    engine = quota_engine('  limits: {gpuEquivalents: "2"}\n')
    ledger = ledger_of(engine, *[slice_pod() for _ in range(12)])
    decision = engine.validate(slice_pod(slice_container(profile="3g.40gb")), ledger)
    assert decision.denials[0].message == "team-a: gpuEquivalents 12/7 + 3/7 exceeds 2 (policy team-a)"
    assert decision.denials[0].path == "spec.quota.limits.gpuEquivalents"


DIMENSIONS = [
    ("  limits: {slices: {1g.10gb: 3}}\n", slice_container(), 3, "slices 1g.10gb"),
    ("  limits: {gpus: 2}\n", gpu_container(), 2, "gpus"),
    ("  limits: {pods: 4}\n", slice_container(), 4, "pods"),
    ('  limits: {gpuEquivalents: "3/7"}\n', slice_container(), 3, "gpuEquivalents"),
]


@pytest.mark.parametrize("limits, container, limit, name", DIMENSIONS, ids=["slices", "gpus", "pods", "equivalents"])
def test_each_dimension_admits_up_to_the_limit_and_denies_one_over(limits, container, limit, name):
    engine = quota_engine(limits)
    at_limit = ledger_of(engine, *[slice_pod(container) for _ in range(limit - 1)])
    assert engine.validate(slice_pod(container), at_limit).allowed
    over = ledger_of(engine, *[slice_pod(container) for _ in range(limit)])
    decision = engine.validate(slice_pod(container), over)
    assert not decision.allowed and f"{name} " in decision.message


def test_an_allowed_pod_near_a_limit_is_told_what_is_left():
    engine = quota_engine("  limits: {slices: {1g.10gb: 5}}\n")
    decision = engine.validate(slice_pod(), ledger_of(engine, *[slice_pod() for _ in range(3)]))
    assert decision.allowed
    assert decision.warnings[0].startswith("team-a: slices 1g.10gb 4 of 5 in use with this pod, 1 left (policy team-a)")


def test_a_dimension_the_pod_does_not_ask_for_cannot_deny_it():
    engine = quota_engine("  limits: {gpus: 0}\n")
    assert engine.validate(slice_pod(), NoUsage()).allowed


def test_the_per_pod_cap_denies_a_single_large_pod():
    engine = quota_engine('  perPod: {gpuEquivalents: "3/7"}\n')
    assert engine.validate(slice_pod(slice_container(profile="3g.40gb")), NoUsage()).allowed
    decision = engine.validate(slice_pod(slice_container(profile="4g.40gb")), NoUsage())
    assert (
        decision.denials[0].message
        == "team-a: pod asks for gpuEquivalents 4/7, over the per-pod cap of 3/7 (policy team-a)"
    )


def test_a_warn_quota_allows_with_the_overrun_as_a_warning():
    engine = quota_engine("  limits: {pods: 0}\n", "  action: warn\n")
    decision = engine.validate(slice_pod(), NoUsage())
    assert decision.allowed and "pods 0 + 1 exceeds 0" in decision.warnings[0]


def test_namespace_scope_gives_each_namespace_its_own_budget():
    engine = quota_engine("  scope: namespace\n  limits: {pods: 1}\n")
    ledger = ledger_of(engine, slice_pod(namespace="team-a"))
    assert engine.validate(slice_pod(namespace="team-b"), ledger).allowed
    assert not engine.validate(slice_pod(namespace="team-a"), ledger).allowed


def test_policy_scope_shares_one_budget_across_namespaces():
    engine = quota_engine("  scope: policy\n  limits: {pods: 1}\n")
    decision = engine.validate(slice_pod(namespace="team-b"), ledger_of(engine, slice_pod(namespace="team-a")))
    assert decision.denials[0].message == "policy-wide team-a: pods 1 + 1 exceeds 1 (policy team-a)"


def test_init_containers_count_as_the_scheduler_counts_them():
    engine = quota_engine("  limits: {slices: {1g.10gb: 100}}\n")
    view = slice_pod(slice_container("a"), slice_container("b"), init=(slice_container("i", count="3"),))
    assert engine.validate(view, NoUsage()).usage.slices == {"1g.10gb": 3}
    view = slice_pod(slice_container("a"), slice_container("b"), init=(slice_container("i", count="1"),))
    assert engine.validate(view, NoUsage()).usage.slices == {"1g.10gb": 2}


def test_native_sidecars_add_to_the_regular_containers():
    engine = quota_engine("  limits: {slices: {1g.10gb: 100}}\n")
    sidecar = {**slice_container("s"), "restartPolicy": "Always"}
    assert engine.validate(slice_pod(slice_container("a"), init=(sidecar,)), NoUsage()).usage.slices == {"1g.10gb": 2}


@pytest.mark.parametrize(
    "phase, counted", [("Running", True), ("Pending", True), ("Succeeded", False), ("Failed", False)]
)
def test_finished_pods_free_their_share(phase, counted):
    engine = quota_engine("  limits: {pods: 1}\n")
    existing = {**slice_pod(), "status": {"phase": phase}}
    assert engine.validate(slice_pod(), ledger_of(engine, existing)).allowed is not counted


def test_pods_being_deleted_still_count():
    engine = quota_engine("  limits: {pods: 1}\n")
    existing = slice_pod()
    existing["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    assert not engine.validate(slice_pod(), ledger_of(engine, existing)).allowed


def test_single_strategy_pods_count_as_slices_of_their_profile():
    engine = engine_from(
        policy("s", "mig: {strategy: single, gpuModels: [B200-180GB]}\nquota:\n  limits: {gpuEquivalents: '1'}\n")
    )
    single = pod(gpu_container(), nodeSelector={"nvidia.com/gpu.product": "NVIDIA-B200-MIG-3g.90gb"})
    assert engine.validate(single, NoUsage()).usage.gpu_equivalents == Fraction(3, 7)


def test_updates_are_not_charged_again():
    from policies.review.request import Operation, RequestInfo

    engine = quota_engine("  limits: {pods: 0}\n")
    assert engine.validate(slice_pod(), NoUsage(), RequestInfo(operation=Operation.UPDATE)).allowed


def test_verdict_actions_are_typed():
    assert rule_engine("audit").validate(slice_pod(), NoUsage()).verdicts[0].action is Action.AUDIT


def test_a_quota_whose_match_reads_what_only_an_admission_has_is_refused_at_load():
    from policies.model.loader import load_texts

    text = policy(
        "by-user",
        """
match:
  condition: "request.userInfo.username == 'alice'"
quota: {limits: {gpus: 1}}
""",
    )
    problems = load_texts([("p.yaml", text)]).problems
    assert [p.path for p in problems] == ["spec.match.condition"]
    assert "a quota's match must hold for running pods too, which have no request.userInfo" in problems[0].message
    rule_only = policy("rule-by-user", "match:\n  condition: \"request.userInfo.username == 'alice'\"\n")
    assert not load_texts([("r.yaml", rule_only)]).problems  # no budget: admission alone decides


def test_an_update_that_narrows_a_gated_pod_onto_split_nodes_is_judged_for_the_slice_it_adds():
    from policies.judge.ledger import Ledger
    from policies.review.request import Operation, RequestInfo

    engine = engine_from(policy("slices", "match: {namespaces: [team-a]}\nquota: {limits: {slices: {1g.10gb: 1}}}\n"))
    gated = pod(gpu_container(), namespace="team-a", schedulingGates=[{"name": "wait"}])
    onto_split = copy.deepcopy(gated)
    onto_split["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
    full = Ledger.from_pods(
        [pod(gpu_container(), namespace="team-a", nodeSelector=onto_split["spec"]["nodeSelector"])],
        engine.policy_set,
    )
    update = RequestInfo("team-a", Operation.UPDATE, old_object=gated)
    decision = engine.validate(onto_split, full, update)
    assert not decision.allowed
    assert "slices" in decision.message
    unchanged = engine.validate(gated, full, RequestInfo("team-a", Operation.UPDATE, old_object=gated))
    assert unchanged.allowed  # an update that adds nothing is not judged against the budget


def team_budgets(*teams: str):
    return engine_from(
        *(
            policy(
                f"team-{team}",
                f"match: {{namespaces: [ml], podSelector: {{matchLabels: {{team: {team}}}}}}}\n"
                "quota: {limits: {gpus: 2}}\n",
            )
            for team in teams
        )
    )


def team_pod(team: str, gpus: int = 1):
    return pod(gpu_container(gpus=gpus), namespace="ml", labels={"team": team})


def test_an_update_that_moves_a_running_pod_into_another_budget_is_judged_there_as_a_create():
    from policies.judge.ledger import Ledger
    from policies.review.request import Operation, RequestInfo

    engine = team_budgets("a", "b")
    held = Ledger.from_pods([team_pod("b", 2), team_pod("a", 1)], engine.policy_set)
    running = team_pod("a")
    relabelled = copy.deepcopy(running)
    relabelled["metadata"]["labels"]["team"] = "b"
    moved = engine.validate(relabelled, held, RequestInfo("ml", Operation.UPDATE, old_object=running))
    assert not moved.allowed
    assert "gpus 2 + 1 exceeds 2" in moved.message and "team-b" in moved.message
    kept = copy.deepcopy(running)
    kept["metadata"]["labels"]["owner"] = "someone"
    assert engine.validate(kept, held, RequestInfo("ml", Operation.UPDATE, old_object=running)).allowed
    room = Ledger.from_pods([team_pod("b", 1)], engine.policy_set)
    into_room = engine.validate(relabelled, room, RequestInfo("ml", Operation.UPDATE, old_object=running))
    assert into_room.allowed and ("team-b", "ml") in into_room.charges  # held there until the watch shows it


def test_an_update_that_brings_a_pod_into_scope_is_charged_whole():
    from policies.judge.ledger import Ledger
    from policies.review.request import Operation, RequestInfo

    engine = team_budgets("a")
    full = Ledger.from_pods([team_pod("a", 2)], engine.policy_set)
    unlabelled = pod(gpu_container(), namespace="ml")
    labelled = team_pod("a")
    decision = engine.validate(labelled, full, RequestInfo("ml", Operation.UPDATE, old_object=unlabelled))
    assert not decision.allowed and "gpus 2 + 1 exceeds 2" in decision.message


def fraction_pod(fraction: str | None, node: str | None = "gpu-1"):
    spec = {"schedulerName": "kai-scheduler", **({"nodeName": node} if node else {})}
    made = pod({"name": "main", "image": "cuda"}, namespace="ml", **spec)
    if fraction is not None:  # KAI's own key, with no prefix
        made["metadata"]["annotations"] = {"gpu-fraction": fraction}
    return made


@pytest.mark.parametrize(
    "now, node, allowed",
    [
        (None, "gpu-1", False),  # the annotation removed from a running pod
        ("0.25", "gpu-1", False),  # lowered
        ("0.5", "gpu-1", True),
        ("0.75", "gpu-1", True),
        (None, None, True),  # not bound yet: its writer may still change what it asks
    ],
    ids=["removed", "lowered", "unchanged", "raised", "pending"],
)
def test_a_bound_pod_keeps_the_gpu_share_it_was_given(now, node, allowed):
    from policies.judge.ledger import Ledger
    from policies.review.request import Operation, RequestInfo

    engine = engine_from(policy("shares", "match: {namespaces: [ml]}\nquota: {limits: {gpuEquivalents: '4'}}\n"))
    before, after = fraction_pod("0.5", node), fraction_pod(now, node)
    decision = engine.validate(
        after, Ledger.from_pods([], engine.policy_set), RequestInfo("ml", Operation.UPDATE, old_object=before)
    )
    assert decision.allowed is allowed, decision.message
    if not allowed:
        assert "[rule quota.boundShare, metadata.annotations.gpu-fraction" in decision.message
        assert "a bound pod keeps the GPU share it was given (0.5 GPU by gpu-fraction)" in decision.message


def test_a_rule_text_shared_by_policies_is_evaluated_once_a_request_and_judges_for_each():
    calls = []
    data = CelInput(lambda: calls.append(1) or {"object": {"metadata": {"labels": {}}}})
    shared = compile_expression("'team' in object.metadata.labels")
    assert [shared.evaluate_bool(data) for _ in range(10)] == [False] * 10
    assert len(data._results) == 1 and calls == [1]
    failing = compile_expression("object.metadata.labels.team == 'a'")
    for _ in range(3):  # a failure is kept too: each policy still fails closed on it
        with pytest.raises(CelEvaluationError):
            failing.evaluate_bool(data)
    rule = (
        "rules: [{name: team, expression: \"'team' in object.metadata.labels\", message: needs a team, action: deny}]"
    )
    engine = engine_from(*(policy(f"p{i}", f"match: {{namespaces: [ml]}}\n{rule}") for i in range(3)))
    decision = engine.validate(pod(gpu_container(), namespace="ml"), NoUsage())
    assert sorted(v.policy for v in decision.verdicts if v.rule == "team") == ["p0", "p1", "p2"]


def test_a_bound_pod_keeps_the_dynamic_limit_it_may_burst_to():
    """Run:ai's dynamic fractions: the limit is what the pod can get, so lowering it on a bound
    pod lowers its charge while what it holds stays: refused as a lowered fraction is."""
    from policies.judge.ledger import Ledger
    from policies.review.request import Operation, RequestInfo

    engine = engine_from(policy("shares", "match: {namespaces: [ml]}\nquota: {limits: {gpuEquivalents: '4'}}\n"))
    before, after = fraction_pod("0.25"), fraction_pod("0.25")
    before["metadata"]["annotations"]["gpu-fraction-limit"] = "0.8"
    after["metadata"]["annotations"]["gpu-fraction-limit"] = "0.3"
    decision = engine.validate(
        after, Ledger.from_pods([], engine.policy_set), RequestInfo("ml", Operation.UPDATE, old_object=before)
    )
    assert not decision.allowed and "[rule quota.boundShare" in decision.message, decision.message
