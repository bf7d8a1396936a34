"""A ResourceClaim several pods name is charged once to each budget those pods are charged to, for
as long as one of them is counted; a claim made while pods already name it (deleted under a
pending pod and made again) is judged for what it adds to their budgets at once; and over any
sequence of claim, template, pod and allocation events, a budget charges at least what its pods
can get and never more than its limit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from policies.gpu.claims import claim_demand
from policies.judge.ledger import Ledger, PodCounts
from policies.judge.pod_facts import facts_of, needs_of
from policies.review.cluster import KnownCluster
from policies.review.request import Operation, RequestInfo
from tests.support.builders import engine_from, pod, policy
from tests.support.dra import claim, claim_pod, claim_spec, cluster, exactly

LIMIT = 3
BUDGET = policy("budget", f"match: {{namespaces: [ml]}}\nquota: {{limits: {{gpus: {LIMIT}}}}}")
ENGINE = engine_from(BUDGET)
POLICY = ENGINE.policy_set.policies[0]


def gpus(name: str, count: int, template: bool = False) -> dict[str, Any]:
    return claim(name, "ml", claim_spec(exactly("gpu.nvidia.com", count)), template=template)


def named(pod_name: str, *claims: str) -> dict[str, Any]:
    made = claim_pod(*claims)
    made["metadata"]["name"] = pod_name
    return made


def gpus_held(ledger: Ledger) -> int:
    return ledger.usage(POLICY, "ml").gpus


def test_pods_naming_one_claim_are_charged_it_once_and_each_counts_as_a_pod():
    state = cluster(gpus("shared", 2))
    ledger = Ledger.from_pods([named("a", "shared"), named("b", "shared")], ENGINE.policy_set, state)
    held = ledger.usage(POLICY, "ml")
    assert (held.gpus, held.pods) == (2, 2)
    assert set(ledger.shared_claims(POLICY, "ml")) == {"ml/shared"}


def test_a_pod_naming_a_claim_its_budget_holds_already_adds_only_itself():
    state = cluster(gpus("shared", 2), gpus("other", 2))
    ledger = Ledger.from_pods([named("a", "shared")], ENGINE.policy_set, state)
    second = ENGINE.validate(named("b", "shared"), ledger, cluster=state)
    assert second.allowed, second.message
    assert second.usage.gpus == 2  # all it can get, for its per-pod caps and its reservation
    denied = ENGINE.validate(named("c", "other"), ledger, cluster=state)
    assert not denied.allowed and "gpus 2 + 2 exceeds 3" in denied.message


def replicas_naming(claim_name: str, replicas: int) -> dict[str, Any]:
    """Volcano's own sample, as a Deployment: every replica names one claim."""
    template = claim_pod(claim_name)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "shared-gpus", "namespace": "ml"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": template["spec"]},
        },
    }


def test_a_claim_every_replica_names_is_charged_once_at_apply_time_as_at_run_time():
    state = cluster(gpus("shared", 2))
    fits = ENGINE.validate(replicas_naming("shared", 2), Ledger.from_pods([], ENGINE.policy_set, state), cluster=state)
    assert fits.allowed and not fits.warnings, fits.warnings  # 2 GPUs once, not 2 x 2 against 3
    ledger = Ledger.from_pods([named("a", "other-pod")], ENGINE.policy_set, cluster(gpus("other-pod", 2)))
    told = ENGINE.validate(replicas_naming("shared", 2), ledger, cluster=state).warnings
    assert any("2 replicas would hold gpus 2 + 2x0 + 2 shared once = 4, over 3" in w for w in told), told
    held = Ledger.from_pods([named("a", "shared")], ENGINE.policy_set, state)
    again = ENGINE.validate(replicas_naming("shared", 3), held, cluster=state)
    assert not again.warnings, again.warnings  # the budget holds the claim already: the replicas add pods only


def test_the_claim_leaves_the_budget_with_the_last_pod_naming_it():
    state = cluster(gpus("shared", 2))
    counts = PodCounts(lambda facts: (("budget", "ml"),))
    needs = needs_of(ENGINE.policy_set)
    for uid in ("a", "b"):
        facts = facts_of(named(uid, "shared"), needs, state)
        assert facts is not None
        counts.add(uid, facts)
    assert gpus_held(counts.ledger) == 2
    counts.remove("a")
    assert gpus_held(counts.ledger) == 2
    counts.remove("b")
    assert counts.ledger.usage(POLICY, "ml").is_zero and not counts.ledger.shared_claims(POLICY, "ml")


def test_a_claim_made_again_under_a_pending_pod_is_judged_for_what_it_adds_to_the_pods_budget():
    """The tenant's way round a limit of 3: a pod admitted on a 1-GPU claim, the claim deleted
    while the pod waits, and made again for 3 GPUs."""
    before = cluster(gpus("c", 1), gpus("other", 2))
    assert ENGINE.validate(named("waiting", "c"), Ledger(), cluster=before).allowed
    after = cluster(gpus("other", 2))  # c deleted: the pod holds nothing, but still names it
    ledger = Ledger.from_pods([named("waiting", "c"), named("runs", "other")], ENGINE.policy_set, after)
    assert "ml/c" in ledger.shared_claims(POLICY, "ml")
    again = ENGINE.validate(gpus("c", 3), ledger, RequestInfo(operation=Operation.CREATE), after)
    assert not again.allowed
    assert "pods here name this claim already, so it adds at once: ml: gpus 2 + 3 exceeds 3" in again.message
    assert "ResourceClaim ml/c" in again.message and "spec.quota.limits.gpus" in again.message
    assert ENGINE.validate(gpus("c", 1), ledger, RequestInfo(operation=Operation.CREATE), after).allowed
    assert ENGINE.validate(gpus("unnamed", 3), ledger, RequestInfo(operation=Operation.CREATE), after).allowed


def test_the_offline_ledger_charges_what_each_admitted_pod_adds():
    state = cluster(gpus("shared", 2))
    ledger = Ledger()
    for name in ("a", "b", "c"):
        decision = ENGINE.validate(named(name, "shared"), ledger, cluster=state)
        assert decision.allowed, decision.message
        ledger.charge(decision.charges, decision.own_usage, decision.shared)
    assert (ledger.usage(POLICY, "ml").gpus, ledger.usage(POLICY, "ml").pods) == (2, 3)


# -- the law ---------------------------------------------------------------------------------------


@dataclass
class World:
    """A namespace as the API server keeps it: claims (name -> GPUs, allocated or not), templates,
    and pods, each naming claims or templates; the claim controller makes a pod's claims from its
    templates as the pod is created, as Kubernetes' does."""

    claims: dict[str, int] = field(default_factory=dict)
    allocated: set[str] = field(default_factory=set)
    templates: dict[str, int] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    # PodGroup `g`, making claim `c0` from template `t` for all its pods: the claim made for it
    # ("" while the template is missing: the controller waits), or no group.
    group: str | None = None

    def cluster(self) -> KnownCluster:
        demands = {("ml", False, n): claim_demand(gpus(n, c)["spec"]) for n, c in self.claims.items()}
        demands |= {("ml", True, n): claim_demand(gpus(n, c)["spec"]) for n, c in self.templates.items()}
        groups = {("ml", "g"): {("c0", "t"): self.group}} if self.group is not None else {}
        return KnownCluster(claims=demands, knows_claims=True, device_classes=cluster().device_classes, groups=groups)

    def ledger(self) -> Ledger:
        """The budget as a replica's watches count it (claims changed: the pods counted again)."""
        return Ledger.from_pods(self.pods.values(), ENGINE.policy_set, self.cluster())

    def can_get(self) -> int:
        """What the pods can get, counted apart from the engine: each claim any pod names once."""
        names = {n for p in self.pods.values() for n in claim_names(p)}
        return sum(self.claims.get(n, 0) for n in names)

    def admitted(self, obj: dict[str, Any]) -> bool:
        return ENGINE.validate(obj, self.ledger(), RequestInfo(namespace="ml"), self.cluster()).allowed


CLAIMS = st.sampled_from(["a", "b"])
COUNTS = st.integers(1, 2)


def happen(world: World, event: tuple[Any, ...], serial: int) -> None:
    what = event[0]
    if what == "claim" and event[1] not in world.claims and world.admitted(gpus(event[1], event[2])):
        world.claims[event[1]] = event[2]
    elif what == "delete claim" and event[1] not in world.allocated:  # in use: Kubernetes keeps it
        world.claims.pop(event[1], None)
    elif what == "template" and "t" not in world.templates:
        if world.admitted(gpus("t", event[1], template=True)):
            world.templates["t"] = event[1]
    elif what == "delete template":
        world.templates.pop("t", None)
    elif what == "group" and world.group is None:
        world.group = ""
        make_group_claim(world)
    elif what == "delete group" and world.group is not None:
        if world.group not in world.allocated:  # owned by the group; in use: Kubernetes keeps it
            world.claims.pop(world.group, None)
        world.group = None
    elif what == "pod":
        found = pod_naming(f"p{serial}", event[1], world, in_group=event[2])
        if found is not None and world.admitted(found[0]):
            world.pods[f"p{serial}"] = found[0]
            for claim_name, template in found[1].items():  # the claim controller's part
                world.claims[claim_name] = world.templates[template]
    elif world.pods and what in ("delete pod", "allocate"):
        name = sorted(world.pods)[event[1] % len(world.pods)]
        if what == "delete pod":
            gone = world.pods.pop(name)
            for ref in gone["status"]["resourceClaimStatuses"]:  # made for it: deleted with it
                world.claims.pop(ref["resourceClaimName"], None)
                world.allocated.discard(ref["resourceClaimName"])
        else:
            names = claim_names(world.pods[name])
            if all(n in world.claims for n in names):  # the scheduler allocates all or none
                world.allocated.update(names)


def make_group_claim(world: World) -> None:
    """The controller's part for the group: its claim made from the template, once there; the
    group's pods waiting for it get it in their status."""
    if world.group != "" or "t" not in world.templates:
        return
    world.group = "g-c0"
    world.claims["g-c0"] = world.templates["t"]
    for each in world.pods.values():
        if each["spec"].get("schedulingGroup") and each["spec"]["resourceClaims"][0].get("name") == "c0":
            statuses = each["status"]["resourceClaimStatuses"]
            if (
                not any(s["name"] == "c0" for s in statuses)
                and "resourceClaimTemplateName" in each["spec"]["resourceClaims"][0]
            ):
                statuses.append({"name": "c0", "resourceClaimName": "g-c0"})


def claim_names(made: dict[str, Any]) -> list[str]:
    """The claims a pod holds: those it names, and those made for it from its templates."""
    named = [c["resourceClaimName"] for c in made["spec"]["resourceClaims"] if "resourceClaimName" in c]
    return named + [c["resourceClaimName"] for c in made["status"]["resourceClaimStatuses"]]


def pod_naming(
    name: str, refs: list[str], world: World, in_group: bool = False
) -> tuple[dict[str, Any], dict[str, str]] | None:
    """A pod naming claims and templates, with the claims the controller makes from its templates
    (name -> template); None where a template is missing: no claim could be made of it. A pod of
    the group whose first claim is the group's (`c0` of `t`) shares the group's claim, or waits
    for it while the group is not there (no claim made for it)."""
    claims: list[dict[str, str]] = []
    made: list[dict[str, str]] = []
    templates: dict[str, str] = {}
    for i, ref in enumerate(refs):
        if ref == "t":
            if ref not in world.templates:
                return None
            claims.append({"name": f"c{i}", "resourceClaimTemplateName": ref})
            if in_group and i == 0:
                if world.group:
                    made.append({"name": "c0", "resourceClaimName": world.group})
                continue  # the group's claim: made once, for the group, or waited for
            made.append({"name": f"c{i}", "resourceClaimName": f"{name}-c{i}"})
            templates[f"{name}-c{i}"] = ref
        else:
            claims.append({"name": f"c{i}", "resourceClaimName": ref})
    container = {"name": "main", "image": "cuda", "resources": {"claims": [{"name": "c0"}]}}
    spec: dict[str, Any] = {"resourceClaims": claims}
    if in_group:
        spec["schedulingGroup"] = {"podGroupName": "g"}
    body = pod(container, namespace="ml", **spec)
    body["metadata"]["name"] = name
    body["status"] = {"resourceClaimStatuses": made}
    return body, templates


class Namespace(RuleBasedStateMachine):
    """Claim, template, pod and allocation events in any order, each judged as the webhook
    judges it, the budget counted again after each as the replica's watches count it."""

    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.serial = 0

    def happen(self, *event: Any) -> None:
        self.serial += 1
        happen(self.world, event, self.serial)

    @rule(name=CLAIMS, count=COUNTS)
    def make_claim(self, name: str, count: int) -> None:
        self.happen("claim", name, count)

    @rule(name=CLAIMS)
    def delete_claim(self, name: str) -> None:
        self.happen("delete claim", name)

    @rule(count=COUNTS)
    def make_template(self, count: int) -> None:
        self.happen("template", count)
        make_group_claim(self.world)

    @rule()
    def delete_template(self) -> None:
        self.happen("delete template")

    @rule(refs=st.lists(st.sampled_from(["a", "b", "t"]), min_size=1, max_size=2, unique=True), grouped=st.booleans())
    def make_pod(self, refs: list[str], grouped: bool) -> None:
        self.happen("pod", refs, grouped)

    @rule()
    def make_group(self) -> None:
        self.happen("group")

    @rule()
    def delete_group(self) -> None:
        self.happen("delete group")

    @rule(name=CLAIMS, count=COUNTS)
    def make_claim_again(self, name: str, count: int) -> None:
        """The hostile tenant's move: a claim its pods name, deleted and made again, bigger."""
        self.happen("delete claim", name)
        self.happen("claim", name, count)

    @rule(which=st.integers(0, 7))
    def delete_pod(self, which: int) -> None:
        self.happen("delete pod", which)

    @rule(which=st.integers(0, 7))
    def allocate(self, which: int) -> None:
        self.happen("allocate", which)

    @invariant()
    def a_budget_charges_what_its_pods_can_get_and_never_more_than_its_limit(self) -> None:
        charged = gpus_held(self.world.ledger())
        assert self.world.can_get() <= charged <= LIMIT, self.world


Namespace.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_over_any_sequence_a_budget_charges_what_its_pods_can_get_and_never_more_than_its_limit = Namespace.TestCase
