"""A CEL expression is given only the fields of `object` it selects, and answers exactly as with all of them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.model.cel import CelEvaluationError, CelInput, compile_expression
from policies.model.cel_fields import object_fields

FIELDS = [
    ("has(object.metadata.labels) && 'team' in object.metadata.labels", {"metadata"}),
    ("object.spec.containers.all(c, c.name != '')", {"spec"}),
    ("object.kind == 'Pod' && object.metadata.name.startsWith('a')", {"kind", "metadata"}),
    ("request.namespace == 'ml'", set()),
    ("object.spec // object['x'] is a comment\n  .containers.size() > 0", {"spec"}),
    ("'''object''' == ''", None),  # a literal that names the variable: not worth the risk
    ("object.size() > 0", None),
    ("object['spec'] != null", None),
    ("object.?spec.hasValue()", None),
    ("x.object.spec", None),
    (".object.spec", None),
    ("object", None),
    ("[1].all(object, object > 0)", None),
    ("object.`spec`", None),
    (r"r'\' == string(object.size())", None),
]


@pytest.mark.parametrize(
    "source, fields",
    FIELDS,
    ids=[
        "has-and-in",
        "macro-on-a-field",
        "two-fields",
        "no-object",
        "line-comment",
        "literal-naming-object",
        "method-on-object",
        "index",
        "optional-select",
        "field-named-object",
        "root-scoped",
        "bare",
        "shadowed-by-macro",
        "quoted-field",
        "raw-string-backslash",
    ],
)
def test_the_fields_an_expression_selects_are_found_or_the_whole_object_is_kept(source, fields):
    assert object_fields(source) == (None if fields is None else frozenset(fields))


EXPRESSIONS = [
    "has(object.metadata.labels) && 'team' in object.metadata.labels",
    "has(object.spec) && object.spec.containers.exists(c, c.name == 'model')",
    "object.metadata.name.startsWith('infer') || object.kind == 'Pod'",
    "has(object.status)",
    "has(object.kind) && has(object.metadata)",
    "object.spec.containers.size() + (has(object.spec.initContainers) ? 1 : 0)",
    "object.metadata.labels['team'] == request.namespace",
]

values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "model", "infer-x", "ml"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["name", "team", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)
pods = st.dictionaries(
    st.sampled_from(["kind", "metadata", "spec", "status", "apiVersion"]),
    values
    | st.fixed_dictionaries({"labels": st.dictionaries(st.sampled_from(["team", "app"]), st.sampled_from(["ml", "a"]))})
    | st.fixed_dictionaries({"containers": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["model", "x"])}))}),
    max_size=5,
)


def _answer(expression, data):
    try:
        return expression.evaluate(data)
    except CelEvaluationError:
        return "error"


@settings(max_examples=300, deadline=None)
@given(pod=pods, source=st.sampled_from(EXPRESSIONS))
def test_an_expression_given_only_its_fields_answers_as_with_the_whole_object(pod, source):
    pruned = compile_expression(source)
    assert pruned.object_fields is not None
    whole = type(pruned)(pruned.source, pruned.program, None)
    data = {"object": pod, "request": {"namespace": "ml"}}
    assert _answer(pruned, CelInput(data)) == _answer(whole, CelInput(data))
