"""Matching is indexed at load; the index must agree with checking every policy one by one."""

from fnmatch import fnmatchcase

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.model.cel import CelInput
from policies.model.loader import load_texts
from policies.model.policyset import PolicySet
from tests.conftest import policy

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
