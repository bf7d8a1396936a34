"""CEL as ValidatingAdmissionPolicy has it: each row of the README's table, as a rule would use it."""

import pytest

from policies.judge.ledger import Ledger
from policies.model.cel import CelCompileError, CelEvaluationError, CelInput, compile_expression
from policies.model.loader import load_texts
from policies.review.cluster import KnownCluster
from policies.review.request import Operation, RequestInfo
from tests.support.builders import engine_from, gpu_container, pod, policy

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train", "labels": {"team": "a", "App": "Web"}},
    "spec": {
        "containers": [
            {"name": "main", "image": "registry.corp/ml/pytorch:2.3", "resources": {"limits": {"memory": "16Gi"}}}
        ]
    },
}


def value(expression: str, obj=POD, **extra):
    return compile_expression(expression).evaluate(CelInput({"object": obj, **extra}))


# (row of the README table, expression, expected value)
ROWS = [
    ("optional: field", "object.?metadata.?annotations.?owner.orValue('none')", "none"),
    ("optional: index", "object.metadata.labels[?'team'].hasValue()", True),
    ("strings: lowerAscii", "object.metadata.labels.App.lowerAscii()", "web"),
    ("strings: split", "object.spec.containers[0].image.split('/')[0]", "registry.corp"),
    ("strings: format", "'%s/%s'.format([object.metadata.name, 'x'])", "train/x"),
    ("strings: indexOf, substring", "'nvidia.com/gpu'.substring(0, 'nvidia.com/gpu'.indexOf('/'))", "nvidia.com"),
    ("regex: find", "object.spec.containers[0].image.find('[0-9]+[.][0-9]+')", "2.3"),
    ("regex: findAll", "'a1b22c333'.findAll('[0-9]+', 2)", ["1", "22"]),
    ("regex: matches", "object.spec.containers[0].image.matches('^registry[.]corp/')", True),
    (
        "quantity: compare",
        "quantity(object.spec.containers[0].resources.limits.memory).isGreaterThan(quantity('8Gi'))",
        True,
    ),
    ("quantity: asInteger", "quantity('2k').asInteger()", 2000),
    # a global function on the API server (k8s.io/apiserver pkg/cel/library/quantity.go), whose
    # type check refuses quantity(...).sign(), the form its own docs write
    ("quantity: sign", "[sign(quantity('-1')), sign(quantity('0')), sign(quantity('2Gi'))]", [-1, 0, 1]),
    ("quantity: add", "quantity('1').add(quantity('500m')).compareTo(quantity('1500m'))", 0),
    ("quantity: isQuantity", "isQuantity('1.5Gi') && !isQuantity('1 ') && !isQuantity('NaN')", True),
    (
        "lists: isSorted, sum, min, max",
        "[1, 2, 3].isSorted() && [1, 2, 3].sum() == 6 && [3, 1].min() == 1 && [3, 1].max() == 3",
        True,
    ),
    (
        "sets",
        "sets.contains(['a', 'b'], ['a']) && sets.intersects(['a'], ['a', 'c']) && sets.equivalent([1, 2], [2, 1])",
        True,
    ),
    ("url", "url('https://models.corp:8443/v2?x=1').getHost() == 'models.corp:8443' && isURL('/v2/health')", True),
    ("url: getQuery", "url('https://h/p?a=1&a=2').getQuery()['a']", ["1", "2"]),
    (
        "semver",
        "semver('1.2.3').isGreaterThan(semver('1.2.0')) && semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))",
        True,
    ),
    (
        "semver: normalize",
        "[semver('v1.02', true).major(), semver('v1.02', true).minor(), semver('1.2.3').patch()]",
        [1, 2, 3],
    ),
    ("semver: isSemver", "isSemver('1.2.3') && !isSemver('1.2') && isSemver('v1.2', true)", True),
    ("semver: compareTo", "semver('2.0.0').compareTo(semver('10.0.0'))", -1),
    ("macros and standard library", "object.spec.containers.all(c, c.image.startsWith('registry.corp/'))", True),
]


@pytest.mark.parametrize("row, expression, expected", ROWS, ids=[r[0] for r in ROWS])
def test_each_available_row_works_as_in_kubernetes(row, expression, expected):
    assert value(expression) == expected


def test_a_bad_quantity_is_an_evaluation_error_and_so_a_denial():
    with pytest.raises(CelEvaluationError, match="Kubernetes quantities"):
        value("quantity('lots').isGreaterThan(quantity('1'))")


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param("authorizer.group('').resource('pods').check('create').allowed()", id="authorizer"),
        pytest.param("ip('10.0.0.1').family() == 4", id="ip"),
        pytest.param("[1, 2].indexOf(2) == 1", id="lists-indexOf"),
    ],
)
def test_what_is_not_available_does_not_compile_rather_than_misbehave(expression):
    with pytest.raises(CelCompileError):
        compile_expression(expression)


VARIABLES = policy(
    "v",
    """
variables:
  - {name: team, expression: "object.?metadata.?labels.?team.orValue('')"}
  - {name: isA, expression: "variables.team == 'a'"}
rules:
  - name: team-a
    expression: "variables.isA"
    messageExpression: "'team ' + variables.team + ' is not team a'"
""",
)


def test_variables_are_computed_once_and_read_by_rules_and_messages():
    engine = engine_from(VARIABLES)
    ok = engine.validate(pod(gpu_container(), labels={"team": "a"}), Ledger())
    assert ok.allowed
    denied = engine.validate(pod(gpu_container(), labels={"team": "b"}), Ledger())
    assert [v.message for v in denied.verdicts] == ["team b is not team a (policy v)"]


@pytest.mark.parametrize(
    "variables, rule, problem",
    [
        (
            "[{name: a, expression: 'variables.b'}, {name: b, expression: '1'}]",
            "true",
            "variables.b is not declared before",
        ),
        ("[{name: a-b, expression: '1'}]", "true", "a name that is a CEL identifier"),
        ("[{name: a, expression: '1'}, {name: a, expression: '2'}]", "true", "duplicate variable name"),
        ("[]", "variables.x", "variables.x is not declared"),
    ],
)
def test_variable_mistakes_are_load_problems(variables, rule, problem):
    text = policy("v", f'variables: {variables}\nrules:\n  - name: r\n    expression: "{rule}"\n')
    result = load_texts([("f.yaml", text)])
    assert any(problem in p.message for p in result.problems), result.problems


def test_old_object_is_the_pod_before_an_update():
    same = "oldObject == null || oldObject.metadata.labels.team == object.metadata.labels.team"
    text = policy("u", f'rules:\n  - name: same-team\n    expression: "{same}"\n')
    engine = engine_from(text)
    before = pod(gpu_container(), labels={"team": "a"})
    after = pod(gpu_container(), labels={"team": "b"})
    update = RequestInfo(namespace="ml", operation=Operation.UPDATE, old_object=before)
    assert not engine.validate(after, Ledger(), request=update).allowed
    assert engine.validate(after, Ledger()).allowed


def test_namespace_object_has_the_namespaces_labels_where_known():
    tier = "namespaceObject != null && namespaceObject.metadata.labels.tier == 'gpu'"
    text = policy("n", f'rules:\n  - name: tier\n    expression: "{tier}"\n')
    engine = engine_from(text)
    cluster = KnownCluster({"ml": {"tier": "gpu"}})
    assert engine.validate(pod(gpu_container()), Ledger(), cluster=cluster).allowed
    unknown = engine.validate(pod(gpu_container()), Ledger())
    assert not unknown.allowed, "unknown namespace: namespaceObject is null, the rule fails closed"
