"""Claims a PodGroup makes for all its pods (Kubernetes 1.36 on, KEP-5729): a pod of the group
whose template claim has the name and template of one of the group's shares the one claim the
resourceclaim controller makes for the group, so a budget charges it once for the whole gang, at
admission, while the pods run and at apply time. Anything else a pod of a group names is its own
(a claim made for the pod, a claim of another name or template, a group not known), charged per
pod as before. Read from Kubernetes' own matching (dynamic-resource-allocation's BindTo, v0.37.2):
every field of the pod's claim equal to the group's."""

from __future__ import annotations

from typing import Any

from policies.judge.ledger import Ledger
from policies.review.pod import parse_pod
from tests.support.builders import engine_from, policy
from tests.support.dra import claim, claim_spec, cluster, exactly, group_pod, pod_group

BUDGET = policy("budget", "match: {namespaces: [ml]}\nquota: {limits: {gpus: 3}}")
ENGINE = engine_from(BUDGET)
POLICY = ENGINE.policy_set.policies[0]
GANG = pod_group("gang", {"gpus": "two-gpus"})


def two_gpus() -> dict[str, Any]:
    return claim("two-gpus", "ml", claim_spec(exactly("gpu.nvidia.com", 2)), template=True)


def admit_in_turn(*pods: dict[str, Any], groups: tuple[dict[str, Any], ...] = (GANG,)) -> list[str]:
    """Each pod validated against a budget holding the ones admitted before it: the messages of
    those denied ("" for each admitted)."""
    state = cluster(two_gpus(), groups=groups)
    admitted: list[dict[str, Any]] = []
    told = []
    for each in pods:
        decision = ENGINE.validate(each, Ledger.from_pods(admitted, ENGINE.policy_set, state), cluster=state)
        told.append("" if decision.allowed else decision.message)
        if decision.allowed:
            admitted.append(each)
    return told


def test_the_pod_reads_its_group_and_each_claims_own_name():
    pod = parse_pod(group_pod("a", "gang", {"gpus": "two-gpus"}))
    assert pod.group == "gang"
    assert [(ref.entry, ref.name, ref.template) for ref in pod.claims] == [("gpus", "two-gpus", True)]


def test_a_gang_sharing_its_groups_claim_is_charged_it_once():
    gang = [group_pod(name, "gang", {"gpus": "two-gpus"}) for name in "abcd"]
    assert admit_in_turn(*gang) == ["", "", "", ""]  # 2 GPUs for the gang, under 3
    state = cluster(two_gpus(), groups=(GANG,))
    held = Ledger.from_pods(gang, ENGINE.policy_set, state).usage(POLICY, "ml")
    assert (held.gpus, held.pods) == (2, 4)


def test_a_claim_the_group_does_not_make_is_each_pods_own():
    other_name = group_pod("a", "gang", {"mine": "two-gpus"})  # the group's template, another name
    second = group_pod("b", "gang", {"mine": "two-gpus"})
    told = admit_in_turn(other_name, second)
    assert told[0] == "" and "gpus 2 + 2 exceeds 3" in told[1]


def test_a_group_not_known_charges_each_pod_its_own_claim():
    told = admit_in_turn(*(group_pod(n, "gang", {"gpus": "two-gpus"}) for n in "ab"), groups=())
    assert told[0] == "" and "gpus 2 + 2 exceeds 3" in told[1]


def test_a_pod_holding_a_claim_made_for_it_alone_is_charged_it_whatever_the_group_says_now():
    # Made for the pod before a group of that name made the claim: the pod's status names its own.
    group = pod_group("gang", {"gpus": "two-gpus"}, made={"gpus": "gang-gpus-x1"})
    mine = claim("a-gpus-q2", "ml", claim_spec(exactly("gpu.nvidia.com", 2)))
    state = cluster(two_gpus(), mine, groups=(group,))
    alone = group_pod("a", "gang", {"gpus": "two-gpus"}, made={"gpus": "a-gpus-q2"})
    ledger = Ledger.from_pods([alone], ENGINE.policy_set, state)
    denied = ENGINE.validate(group_pod("b", "gang", {"gpus": "two-gpus"}), ledger, cluster=state)
    assert not denied.allowed and "gpus 2 + 2 exceeds 3" in denied.message
    shared = group_pod("c", "gang", {"gpus": "two-gpus"}, made={"gpus": "gang-gpus-x1"})
    ledger = Ledger.from_pods([shared], ENGINE.policy_set, state)
    assert ENGINE.validate(group_pod("d", "gang", {"gpus": "two-gpus"}), ledger, cluster=state).allowed


def test_each_pod_may_use_all_the_group_claim_holds_for_its_per_pod_caps():
    capped = engine_from(policy("capped", "match: {namespaces: [ml]}\nquota: {perPod: {gpus: 1}}"))
    state = cluster(two_gpus(), groups=(GANG,))
    ledger = Ledger.from_pods([], capped.policy_set, state)
    denied = capped.validate(group_pod("a", "gang", {"gpus": "two-gpus"}), ledger, cluster=state)
    assert not denied.allowed and "gpus 2, over the per-pod cap of 1" in denied.message, denied.message


def job_of_the_gang(parallelism: int) -> dict[str, Any]:
    template = group_pod("worker", "gang", {"gpus": "two-gpus"})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "gang", "namespace": "ml"},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": {"spec": template["spec"]}},
    }


def test_a_workload_whose_pods_share_their_groups_claim_is_charged_it_once_at_apply_time():
    state = cluster(two_gpus(), groups=(GANG,))
    ledger = Ledger.from_pods([], ENGINE.policy_set, state)
    fits = ENGINE.validate(job_of_the_gang(4), ledger, cluster=state)
    assert fits.allowed and not fits.warnings, fits.warnings
    alone = cluster(two_gpus())
    warned = ENGINE.validate(job_of_the_gang(4), Ledger.from_pods([], ENGINE.policy_set, alone), cluster=alone)
    assert any("4 replicas would hold gpus" in w for w in warned.warnings), warned.warnings


def test_a_template_made_again_under_pods_still_waiting_for_their_claim_is_judged_for_each():
    """A pod of a group not made yet waits for its claim; its template deleted meanwhile and made
    again bigger would hand it more than its budget had room for: the template's creation is
    judged against the budgets of the pods waiting for it, once a pod."""
    waiting = [group_pod(name, "later", {"gpus": "two-gpus"}) for name in "ab"]
    state = cluster()  # the template deleted under them
    ledger = Ledger.from_pods(waiting, ENGINE.policy_set, state)
    one_gpu = claim("two-gpus", "ml", claim_spec(exactly("gpu.nvidia.com", 1)), template=True)
    denied = ENGINE.validate(one_gpu, ledger, cluster=state)  # 2 waiting pods x 1 GPU, under 3: fits
    assert denied.allowed, denied.message
    bigger = claim("two-gpus", "ml", claim_spec(exactly("gpu.nvidia.com", 2)), template=True)
    denied = ENGINE.validate(bigger, ledger, cluster=state)  # 2 x 2 over 3
    assert not denied.allowed and "pods here name this claim already" in denied.message, denied.message
