"""Matching is indexed at load; the index must agree with checking every policy one by one."""

from fnmatch import fnmatchcase

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.model.cel import CelEvaluationError, CelInput
from policies.model.cel_fields import required_field, required_label
from policies.model.loader import load_texts
from policies.model.policyset import PolicySet
from tests.support.builders import policy

PATTERNS = ["team-a", "team-*", "ml-?", "*", "[ab]-x", "prod", "ml-*-gpu"]
NAMESPACES = ["team-a", "team-b", "ml-1", "ml-x-gpu", "a-x", "prod", "kube-system", "m"]


def build(specs):
    texts = []
    for i, (patterns, selector) in enumerate(specs):
        match = []
        if patterns:
            match.append(f"namespaces: {patterns!r}")
        if selector:
            match.append("podSelector: {matchLabels: {tier: gpu}}")
        body = "match: {" + ", ".join(match) + "}" if match else ""
        texts.append((f"p{i}.yaml", policy(f"p{i:03d}", body)))
    result = load_texts(texts)
    assert not result.problems
    return PolicySet(result.policies)


specs = st.lists(st.tuples(st.lists(st.sampled_from(PATTERNS), max_size=3), st.booleans()), max_size=12)


@settings(max_examples=200, deadline=None)
@given(specs, st.sampled_from(NAMESPACES), st.booleans())
def test_the_index_matches_exactly_what_a_linear_scan_matches(specs, namespace, labelled):
    policy_set = build(specs)
    labels = {"tier": "gpu"} if labelled else {}
    expected = [
        p.name
        for p in policy_set.policies
        if (not p.match.namespaces or any(fnmatchcase(namespace, pat) for pat in p.match.namespaces))
        and (p.match.pod_selector is None or p.match.pod_selector.matches(labels))
    ]
    assert [p.name for p in policy_set.matching(namespace, labels).policies] == expected


def test_match_expressions_follow_kubernetes_selector_semantics():
    text = policy(
        "sel",
        """
match:
  podSelector:
    matchExpressions:
      - {key: tier, operator: In, values: [gpu, ml]}
      - {key: legacy, operator: DoesNotExist}
      - {key: env, operator: NotIn, values: [dev]}
""",
    )
    policy_set = PolicySet(load_texts([("s.yaml", text)]).policies)
    assert policy_set.matching("x", {"tier": "ml"}).policies
    assert not policy_set.matching("x", {"tier": "ml", "legacy": "1"}).policies
    assert not policy_set.matching("x", {"tier": "ml", "env": "dev"}).policies
    assert not policy_set.matching("x", {}).policies


def test_a_cel_condition_narrows_the_match_and_a_failing_one_is_reported():
    text = policy("cond", "match:\n  condition: \"object.metadata.labels.tier == 'gpu'\"")
    policy_set = PolicySet(load_texts([("c.yaml", text)]).policies)
    data = CelInput({"object": {"metadata": {"labels": {"tier": "gpu"}}}, "request": {}})
    assert policy_set.matching("x", {}, data).policies
    failing = policy_set.matching("x", {}, CelInput({"object": {"metadata": {}}, "request": {}}))
    assert not failing.policies and "spec.match.condition" in failing.errors[0][1]


CONDITIONS = [
    "object.metadata.labels['team'] == 'a'",
    "object.metadata.labels.team == 'b' && object.metadata.name != 'z'",
    "'a' == object.metadata.labels['team'] && object.metadata.labels['tier'] == 'gpu'",
    "object.metadata.labels['team'] == 'a' || object.metadata.labels['tier'] == 'gpu'",
    "has(object.metadata.labels.tier) && object.metadata.labels.tier == 'gpu'",
    "object.metadata.labels['missing'] == 'x' && false",
    "object.metadata.labels['tier'] == 'cpu'",
    "object.metadata.name == 'a'",
    "'gpu' == object.metadata.annotations['tier'] && object.metadata.labels['team'] == 'b'",
    "object.spec.priorityClassName == 'a'",
]
SELECTORS = ["{matchLabels: {tier: gpu}}", "{matchLabels: {team: a, tier: gpu}}", "{matchLabels: {team: b}}"]
LABELS = st.dictionaries(st.sampled_from(["team", "tier", "other"]), st.sampled_from(["a", "b", "gpu", "cpu"]))
VALUES = st.sampled_from(["a", "b", "gpu", 7, None])  # a string, or no string: CEL decides those
OBJECTS = st.fixed_dictionaries(
    {},
    optional={
        "name": VALUES,
        "annotations": st.dictionaries(st.sampled_from(["tier", "other"]), st.sampled_from(["a", "gpu"])),
        "spec": st.fixed_dictionaries({}, optional={"priorityClassName": VALUES}),
    },
)


def indexed_set(choices):
    texts = []
    for i, (selector, condition) in enumerate(choices):
        match = ['namespaces: ["team-a"]']
        if selector is not None:
            match.append(f"podSelector: {SELECTORS[selector]}")
        if condition is not None:
            match.append(f'condition: "{CONDITIONS[condition]}"')
        texts.append((f"p{i}.yaml", policy(f"p{i:03d}", "match: {" + ", ".join(match) + "}")))
    result = load_texts(texts)
    assert not result.problems, result.problems
    return PolicySet(result.policies)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.none() | st.integers(0, len(SELECTORS) - 1), st.none() | st.integers(0, len(CONDITIONS) - 1)),
        max_size=10,
    ),
    LABELS,
    OBJECTS,
)
def test_the_index_matches_and_reports_exactly_what_evaluating_every_policy_does(choices, labels, fields):
    """Policies left out by a podSelector pair, or by a label or other field their condition
    requires to hold a string, are never examined; matches and condition errors are exactly those
    of checking every policy."""
    policy_set = indexed_set(choices)
    metadata = {"labels": labels} | {k: v for k, v in fields.items() if k != "spec"}
    pod = {"metadata": {k: v for k, v in metadata.items() if v is not None}}
    if "spec" in fields:
        pod["spec"] = {k: v for k, v in fields["spec"].items() if v is not None}
    found = policy_set.matching("team-a", labels, CelInput({"object": pod, "request": {}}), obj=pod)
    expected, errors = [], []
    for p in policy_set.policies:
        if p.match.pod_selector is not None and not p.match.pod_selector.matches(labels):
            continue
        if p.match.condition is not None:
            try:
                if not p.match.condition.evaluate_bool(CelInput({"object": pod, "request": {}})):
                    continue
            except CelEvaluationError:
                errors.append(p.name)
                continue
        expected.append(p.name)
    assert [p.name for p in found.policies] == expected
    assert [p.name for p, _ in found.errors] == errors


@pytest.mark.parametrize(
    "source, label",
    [
        ("object.metadata.labels['team'] == 'x'", ("team", "x")),
        ("'x' == object.metadata.labels.team && request.namespace != 'a'", ("team", "x")),
        ("a.b && object.metadata.labels['t'] == \"v\"", ("t", "v")),
        ("object.metadata.labels['team'] == 'x' || true", None),
        ("c ? object.metadata.labels['t'] == 'x' : true", None),
        ("object.metadata.labels['team'] != 'x'", None),
        ("object.metadata.labels['t'] + 'a' == 'xa'", None),
        ("object.metadata.labels['t'] == 'a\\\\'b'", None),
        ("(object.metadata.labels['t'] == 'x')", None),
    ],
    ids=["subscript", "field-reversed-and", "second-operand", "or", "ternary", "not-equal", "sum", "escaped", "parens"],
)
def test_a_required_label_is_found_only_where_the_expression_is_false_without_it(source, label):
    assert required_label(source) == label


@pytest.mark.parametrize(
    "source, field",
    [
        ("object.metadata.name == 'x'", (("metadata", "name"), "x")),
        ("'v' == object.metadata.annotations['a.b/c'] && true", (("metadata", "annotations", "a.b/c"), "v")),
        ("object.spec.priorityClassName == 'high'", (("spec", "priorityClassName"), "high")),
        ("object.spec.containers[0].name == 'x'", None),
        ("object.metadata.name.lowerAscii() == 'x'", None),
        ("oldObject.metadata.name == 'x'", None),
        ("object == 'x'", None),
    ],
    ids=["name", "annotation", "spec-field", "list-index", "call", "old-object", "whole-object"],
)
def test_a_required_field_is_a_chain_of_keys_of_object_compared_to_a_string(source, field):
    assert required_field(source) == field
