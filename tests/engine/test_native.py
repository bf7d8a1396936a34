"""Native policies: a policy's rules as ValidatingAdmissionPolicies (policies.native). The real API
server judges them in tests/e2e/test_native.py; here, their shape, and what they say."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

import kubernetes_validate
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies import NameClash, native_policies
from policies.model.cel import CelEvaluationError, CelInput, compile_expression
from policies.model.loader import load_texts
from policies.native.device_access import DEFAULT_NAME
from policies.native.matching import glob_regex
from policies.native.objects import PARTS, object_name
from tests.support.builders import pod, policy

K8S = kubernetes_validate.latest_version()
RULES = policy(
    "team-a",
    """
    match:
      namespaces: [team-a, "team-a-*"]
      podSelector: {matchLabels: {tier: gpu}}
      namespaceSelector: {matchExpressions: [{key: env, operator: NotIn, values: [prod]}]}
      condition: "object.metadata.name != 'exempt'"
    variables:
      - {name: team, expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"}
    rules:
      - {name: team-label, expression: "variables.team", message: "needs a team label", action: deny}
      - name: pinned
        expression: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
        message: |
          pin your images.
          Not latest.
        action: warn
      - name: owner
        expression: "has(object.metadata.annotations) && 'owner' in object.metadata.annotations"
        messageExpression: "'no owner on ' + object.metadata.name"
        action: audit
    """,
)


def objects(*documents: str) -> list[dict]:
    """The objects made of the policies' rules (the default device-access checks, made wherever a
    cluster policy is, are tests/engine/test_native_device_access.py's)."""
    result = load_texts([(f"p{i}.yaml", d) for i, d in enumerate(documents)])
    assert not result.problems, result.problems
    return [o for o in native_policies(result.policies).objects if o["metadata"]["name"] != DEFAULT_NAME]


def by_name(found: list[dict]) -> dict[tuple[str, str], dict]:
    return {(o["kind"], o["metadata"]["name"]): o for o in found}


def test_a_policy_becomes_one_policy_and_binding_per_action_each_valid_for_the_api_server():
    found = by_name(objects(RULES))
    names = {"gpu-admission.team-a", "gpu-admission.team-a.warn", "gpu-admission.team-a.audit"}
    assert {name for kind, name in found if kind == "ValidatingAdmissionPolicy"} == names
    assert {name for kind, name in found if kind == "ValidatingAdmissionPolicyBinding"} == names
    actions = {name: o["spec"]["validationActions"] for (kind, name), o in found.items() if "Binding" in kind}
    assert actions == {
        "gpu-admission.team-a": ["Deny"],
        "gpu-admission.team-a.warn": ["Warn"],
        "gpu-admission.team-a.audit": ["Audit"],
    }
    for obj in found.values():
        kubernetes_validate.validate(obj, K8S, strict=True)


def test_the_match_is_the_webhook_scope_then_the_policy_own():
    found = by_name(objects(RULES))
    vap = found["ValidatingAdmissionPolicy", "gpu-admission.team-a"]["spec"]
    assert vap["failurePolicy"] == "Fail"
    assert vap["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
    left_alone = vap["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert {"kube-system", "gpu-admission"} <= set(left_alone)
    (condition,) = vap["matchConditions"]
    assert condition["name"] == "the-policy-matches"
    parts = condition["expression"].split(" &&\n")
    assert parts[0] == "(request.namespace in ['team-a'] || request.namespace.matches('^team\\\\-a\\\\-.*$'))"
    assert parts[-1] == "(object.metadata.name != 'exempt')"
    assert vap["variables"] == [
        {"name": "team", "expression": "has(object.metadata.labels) && 'team' in object.metadata.labels"}
    ]
    binding = found["ValidatingAdmissionPolicyBinding", "gpu-admission.team-a"]["spec"]["matchResources"]
    assert binding["objectSelector"] == {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}
    assert binding["namespaceSelector"] == {
        "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]
    }


def test_messages_are_the_engine_on_one_line_naming_policy_rule_and_field():
    found = by_name(objects(RULES))
    deny = found["ValidatingAdmissionPolicy", "gpu-admission.team-a"]["spec"]["validations"]
    warn = found["ValidatingAdmissionPolicy", "gpu-admission.team-a.warn"]["spec"]["validations"]
    audit = found["ValidatingAdmissionPolicy", "gpu-admission.team-a.audit"]["spec"]["validations"]
    assert deny[0]["message"] == "needs a team label (policy team-a) [rule team-label, spec.rules[0].expression]"
    assert warn[0]["message"] == "pin your images. Not latest. (policy team-a) [rule pinned, spec.rules[1].expression]"
    assert audit[0]["messageExpression"] == (
        "string('no owner on ' + object.metadata.name) + ' (policy team-a) [rule owner, spec.rules[2].expression]'"
    )


def evaluate(expression: str, obj: dict, namespace: str = "ml") -> object:
    request = {"namespace": namespace, "userInfo": {"username": "alice", "groups": []}}
    return compile_expression(expression).evaluate(
        CelInput({"object": obj, "request": request, "variables": {"team": True}})
    )


def test_the_policy_condition_is_evaluated_only_where_the_engine_evaluates_it():
    """A condition that fails on pods without labels: for a pod outside the namespaces, or with no
    GPU, it is never reached (the API server would deny on the error); for a GPU pod in them it is."""
    unguarded = policy(
        "u",
        """
        match: {namespaces: [team-a], condition: "object.metadata.labels['owner'] != ''"}
        rules: [{name: r, expression: "true", message: m}]
        """,
    )
    (condition,) = by_name(objects(unguarded))["ValidatingAdmissionPolicy", "gpu-admission.u"]["spec"][
        "matchConditions"
    ]
    plain = pod({"name": "c", "image": "busybox"})
    gpu = pod()
    assert evaluate(condition["expression"], gpu, namespace="team-b") is False
    assert evaluate(condition["expression"], plain, namespace="team-a") is False
    try:
        evaluate(condition["expression"], gpu, namespace="team-a")
    except CelEvaluationError:
        pass
    else:
        raise AssertionError("a GPU pod in the namespace meets the condition, and its error")


def test_the_deny_policy_guards_warn_and_audit_rules_so_an_error_denies_as_the_engine_does():
    """(E) || !(E): true whatever E says, an error exactly where E is one."""
    guarded = policy(
        "g",
        """
        rules:
          - {name: tier, expression: "object.metadata.annotations['tier'] == 'gold'", message: gold, action: warn}
        """,
    )
    found = by_name(objects(guarded))
    guard = found["ValidatingAdmissionPolicy", "gpu-admission.g"]["spec"]["validations"][0]
    assert "rule could not be evaluated, denied to be safe (policy g) [rule tier" in guard["message"]
    for tier in ("gold", "x"):
        assert evaluate(guard["expression"], {"metadata": {"annotations": {"tier": tier}}}) is True
    try:
        evaluate(guard["expression"], {"metadata": {"annotations": {"other": "x"}}})
    except CelEvaluationError:
        pass
    else:
        raise AssertionError("the guard of a rule that fails must fail too")


@given(
    st.text("ab-", min_size=0, max_size=6),
    st.text("ab-*?[]!", min_size=1, max_size=6),
)
def test_namespace_globs_match_as_fnmatch_does(namespace: str, pattern: str):
    assert bool(re.match(glob_regex(pattern), namespace)) == fnmatchcase(namespace, pattern)


def test_names_that_are_no_dns_subdomain_get_one_made_unique():
    found = objects(policy("Team A", "rules: [{name: r, expression: 'true', message: m}]"))
    found += objects(policy("team_a", "rules: [{name: r, expression: 'true', message: m}]"))
    names = [o["metadata"]["name"] for o in found if o["kind"] == "ValidatingAdmissionPolicy"]
    assert len(set(names)) == 2 and all(re.fullmatch(r"gpu-admission\.team-a-[0-9a-f]{8}", n) for n in names)
    assert {o["metadata"]["annotations"]["gpu-admission.io/policy"] for o in found} == {"Team A", "team_a"}


def test_a_policy_named_as_another_policy_part_is_named_by_its_hash():
    # Policy `x`'s gate and device checks and policy `x.mig`'s rules would otherwise be one object.
    deny = "rules: [{name: r, expression: 'true', message: m}]"
    warn = "rules: [{name: r, expression: 'true', message: m, action: warn}]"
    mig = "mig: {allowedProfiles: [1g.10gb]}\nsecurity: {action: warn}\n" + deny
    found = objects(policy("x", mig), policy("x.mig", deny), policy("x.security", deny), policy("x.warn", warn))
    policies = [o for o in found if o["kind"] == "ValidatingAdmissionPolicy"]
    owner = {o["metadata"]["name"]: o["metadata"]["annotations"]["gpu-admission.io/policy"] for o in policies}
    assert len(owner) == len(policies)
    assert {n for n, p in owner.items() if p == "x"} == {
        "gpu-admission.x",
        "gpu-admission.x.mig",
        "gpu-admission.x.security",
    }
    for other in ("x.mig", "x.security", "x.warn"):
        names = [n for n, p in owner.items() if p == other]
        assert names and all(re.fullmatch(rf"gpu-admission\.x-{other[2:]}-[0-9a-f]{{8}}(\.warn)?", n) for n in names)


NAME = st.text(alphabet="ab.-", min_size=1, max_size=6) | st.sampled_from(["a", *(f"a{p}" for p in PARTS)])


@given(first=NAME, second=NAME, parts=st.tuples(st.sampled_from(["", *PARTS]), st.sampled_from(["", *PARTS])))
def test_two_policies_objects_never_share_a_name(first: str, second: str, parts: tuple[str, str]):
    if (first, parts[0]) != (second, parts[1]):
        assert object_name(first, parts[0]) != object_name(second, parts[1])


def test_objects_that_would_share_a_name_are_refused_not_made():
    rules = "rules: [{name: r, expression: 'true', message: m}]"
    hashed = object_name("Team A").removeprefix("gpu-admission.")
    result = load_texts([("p.yaml", policy("Team A", rules)), ("q.yaml", policy(hashed, rules))])
    with pytest.raises(NameClash, match=f"would both be named gpu-admission.{hashed}"):
        native_policies(result.policies)


def test_what_stays_with_the_webhook_is_listed_and_a_policy_without_rules_makes_only_the_defaults():
    result = load_texts([("p.yaml", policy("budget", "quota: {limits: {pods: 1}}"))])
    native = native_policies(result.policies)
    assert native.policies == () and native.defaults
    assert {o["metadata"]["name"] for o in native.objects} == {DEFAULT_NAME}
    assert [u.part for u in native.uncovered] == ["quota", "security"]
    assert str(native.uncovered[0]) == "policy budget: quota: left to the webhook (budgets count the cluster's pods)"
