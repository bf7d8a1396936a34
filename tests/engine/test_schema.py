"""The JSON Schema of GPUPolicy: shipped, rendered into docs/policy-fields.md, and in agreement
with the loader: every document the schema accepts, the loader accepts, and the reverse, over
the examples and generated documents (whose cross-field relations hold: what the schema leaves
to the loader is listed in tools/policy_schema/schema.py)."""

import importlib.resources
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.model import loader, sections
from policies.model.loader import load_texts
from tools.policy_schema.docs import render
from tools.policy_schema.schema import gpupolicy_schema

ROOT = Path(__file__).parents[2]
SCHEMA_FILE = ROOT / "policies" / "model" / "gpupolicy.schema.json"
DOC = ROOT / "docs" / "policy-fields.md"
SCHEMA = gpupolicy_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_the_shipped_schema_and_the_field_reference_are_what_the_code_builds():
    assert json.loads(SCHEMA_FILE.read_text()) == SCHEMA, "python -m tools.generate"
    assert DOC.read_text() == render(SCHEMA), "python -m tools.generate"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_the_schema_ships_in_the_package():
    shipped = importlib.resources.files("policies.model").joinpath("gpupolicy.schema.json").read_text()
    assert json.loads(shipped)["$id"] == SCHEMA["$id"]


def documented_fields() -> set[str]:
    text = DOC.read_text()
    start = text.index("## GPUPolicy")
    rows = [
        line.split("`")[1]
        for line in text[start : text.index("## WorkloadKind")].splitlines()
        if line.startswith("| `")
    ]
    return {row.replace("[]", "") for row in rows}


def test_every_field_the_loader_reads_is_documented_and_nothing_else():
    nested = {
        "spec": loader._SPEC,
        "spec.match": loader._MATCH,
        "spec.mig": sections._MIG,
        "spec.runtime": sections._RUNTIME,
        "spec.runtime.tolerations": sections._TOLERATION,
        "spec.triton": sections._TRITON,
        "spec.triton.resources": sections._TRITON_RESOURCES,
        "spec.variables": sections._VARIABLE,
        "spec.rules": sections._RULE,
        "spec.quota": sections._QUOTA,
        "spec.quota.limits": sections._LIMITS,
        "spec.quota.perPod": sections._LIMITS,
        "spec.security": sections._SECURITY,
    }
    fields = {"metadata.name"} | {f"{parent}.{key}" for parent, keys in nested.items() for key in keys}
    assert documented_fields() == fields


def loads(document) -> bool:
    result = load_texts([("doc.yaml", yaml.safe_dump(document, sort_keys=False))])
    return not result.problems


def policy_documents():
    for path in sorted((ROOT / "examples" / "policies").glob("*.yaml")) + [ROOT / "policies/bundled/default.yaml"]:
        for document in yaml.safe_load_all(path.read_text()):
            yield pytest.param(document, id=f"{path.name}:{document['metadata']['name']}")


@pytest.mark.parametrize("document", list(policy_documents()))
def test_every_shipped_policy_is_valid_to_both(document):
    assert VALIDATOR.is_valid(document), [e.message for e in VALIDATOR.iter_errors(document)]
    assert loads(document)


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "policies").glob("*.yaml")), ids=lambda p: p.name)
def test_the_examples_name_the_schema_for_editors(path):
    first = path.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../policies/model/gpupolicy.schema.json"


# Generated documents. Values the schema and the loader both judge; cross-field relations hold.
MODELS = ["H100-80GB", "A100-80GB"]
PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
GOOD_QUANTITIES = ["1Gi", "512Mi", "1", "0.5", "100m", "1e3", "2k", 1, 2.5]
BAD_QUANTITIES = ["0", "0Gi", "-1", "1 ", "NaN", "1ki", "", "1.5.2", 0, -2, True, [], {}]
GOOD_AMOUNTS = ["0", "1", "1.5", "3/7", ".5", "2.", 0, 3]
BAD_AMOUNTS = ["-1", "1/0", "abc", "1e3", " 2", "1_0", "", -1, 1.5, True, [], None]
WRONG = [None, 7, "x", [], {}, True]  # wrong types, one of which may be right for a field


def either(good, bad):
    return st.one_of(st.sampled_from(good), st.sampled_from(bad))


def optional(strategy):
    """Absent, null, or a value."""
    return st.one_of(st.just(...), st.none(), strategy)


@st.composite
def sections_(draw):
    spec = {}

    def put(name, strategy):
        if not isinstance(strategy, st.SearchStrategy):
            strategy = st.just(strategy)
        value = draw(optional(strategy))
        if value is not ...:
            spec[name] = value

    allowed = draw(st.lists(st.sampled_from(PROFILES), unique=True, max_size=3))
    mig = {
        "strategy": either(["mixed", "single"], ["Mixed", "", 3]),
        "gpuModels": st.one_of(
            st.lists(st.sampled_from(MODELS), unique=True), st.sampled_from([["B200"], "H100-80GB", [None]])
        ),
        "allowedProfiles": st.one_of(st.just(allowed), st.sampled_from([["1g.11gb"], "1g.10gb", [3]])),
        "defaultProfile": either(allowed or PROFILES, ["1g.11gb", "", 1]) if allowed else either(PROFILES, ["1g.11gb"]),
        "multiGpu": either(["keep", "deny"], ["split", 0]),
    }
    put("mig", mapping_of(draw, mig))
    put("priority", st.one_of(st.integers(-5, 5), st.sampled_from(["1", True, None])))
    runtime = {
        "runtimeClassName": either(["nvidia"], ["", 3]),
        "nodeSelector": either([{"pool": "gpu"}], [{"pool": 1}, ["a"]]),
        "env": either([{"A": "1"}], [{"A": 1}, "A=1"]),
        "shmSize": either(GOOD_QUANTITIES, BAD_QUANTITIES),
        "tolerations": either(
            [[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], [None], []],
            [[{"operator": "Maybe"}], [{"effect": "Sometimes"}], [{"bogus": 1}], "all"],
        ),
    }
    put("runtime", mapping_of(draw, runtime))
    triton = {
        "image": either(["nvcr.io/nvidia/tritonserver:24.08-py3"], ["", 1]),
        "modelRepository": either(["s3://models"], ["", []]),
        "profile": either(allowed or PROFILES, ["1g.11gb"]) if allowed or "mig" not in spec else st.just(...),
        "nativeSidecar": either([True, False], ["yes", 1]),
        "resources": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "cpu": either(GOOD_QUANTITIES, BAD_QUANTITIES),
                    "memory": either(GOOD_QUANTITIES, BAD_QUANTITIES),
                },
            ),
            st.sampled_from([[], "4Gi", {"gpu": 1}]),
        ),
    }
    if allowed and isinstance(spec.get("mig"), dict) and spec["mig"].get("allowedProfiles") != allowed:
        triton.pop("profile")  # the sidecar's profile meets allowedProfiles: cross-field
    put("triton", mapping_of(draw, triton))
    limits = {
        "gpuEquivalents": either(GOOD_AMOUNTS, BAD_AMOUNTS),
        "slices": either([{p: 2} for p in PROFILES] + [{}], [{"1g.11gb": 1}, {"1g.10gb": -1}, {"1g.10gb": "2"}, [1]]),
        "gpus": either([0, 3], [-1, "2", 1.5]),
        "pods": either([0, 10], [-3, "x"]),
    }
    quota = {
        "scope": either(["namespace", "policy"], ["cluster"]),
        "limits": st.just(mapping_of(draw, limits)),
        "perPod": st.just(mapping_of(draw, limits)),
        "action": either(["deny", "warn"], ["audit", "block"]),
        "consistency": either(["strict", "local"], ["eventual"]),
        "sharedWeight": either(["1", "1/2", "0", 1, 0], ["-1", "x", 1.5]),
    }
    put("quota", mapping_of(draw, quota))
    rule = st.fixed_dictionaries(
        {
            "name": either(["r1"], [None, "", 3]),
            "expression": either(["'team' in object.metadata.labels"], [None, "", 1]),
        },
        optional={"action": either(["deny", "warn", "audit"], ["block"]), "message": either(["m"], ["", 2])},
    )
    put("rules", st.one_of(st.lists(rule, max_size=1), st.sampled_from(["r", {"name": "r"}, [None]])))
    put(
        "match",
        st.fixed_dictionaries(
            {},
            optional={
                "namespaces": either([["ml", "team-*"], []], ["ml", [1], [""], [None]]),
                "podSelector": either(
                    [{"matchLabels": {"team": "a"}}, {"matchExpressions": [{"key": "t", "operator": "Exists"}]}, {}],
                    [
                        {"matchLabels": {"team": 1}},
                        {"matchExpressions": [{"key": "t", "operator": "In"}]},
                        {"matchLabels": []},
                        {"bogus": {}},
                        "team=a",
                    ],
                ),
            },
        ),
    )
    put(
        "security",
        mapping_of(
            draw,
            {
                "action": either(["deny", "warn", "audit"], ["allow"]),
                "allow": either([["deviceEnv"], []], [["everything"], "deviceEnv"]),
            },
        ),
    )
    if draw(st.booleans()):
        spec[draw(st.sampled_from(["bogus", "Mig", "quotas"]))] = {}
    return spec


def mapping_of(draw, fields):
    """A mapping with some of `fields` (absent, null or drawn), now and then the wrong type or an
    unknown key."""
    shape = draw(st.sampled_from(["mapping"] * 8 + ["wrong", "unknown"]))
    if shape == "wrong":
        return draw(st.sampled_from([[], "x", 3]))
    result = {}
    for name, strategy in fields.items():
        value = draw(optional(strategy))
        if value is not ...:
            result[name] = value
    if shape == "unknown":
        result["unknownField"] = 1
    return result


@pytest.mark.slow
@given(spec=sections_(), name=st.sampled_from(["p", "", None, 3]))
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_the_schema_and_the_loader_accept_the_same_documents(spec, name):
    document = {
        "apiVersion": "gpu-admission.io/v1alpha1",
        "kind": "GPUPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }
    by_schema = VALIDATOR.is_valid(document)
    assert by_schema == loads(document), (
        [e.message for e in VALIDATOR.iter_errors(document)][:3],
        load_texts([("d", yaml.safe_dump(document))]).problems[:3],
    )


WORKLOAD = {
    "apiVersion": "gpu-admission.io/v1alpha1",
    "kind": "WorkloadKind",
    "metadata": {"name": "trainjob"},
    "spec": {"group": "trainer.kubeflow.org", "kind": "TrainJob", "templates": [{"path": "spec.podTemplate"}]},
}


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({}, id="valid"),
        pytest.param({"templates": []}, id="no-templates"),
        pytest.param({"templates": [{"path": "spec.t", "form": "pod"}]}, id="unknown-form"),
        pytest.param({"templates": [{"path": "spec.t", "form": None}]}, id="null-form"),
        pytest.param({"group": None}, id="null-group"),
        pytest.param({"kind": ""}, id="empty-kind"),
        pytest.param({"extra": 1}, id="unknown-field"),
        pytest.param({"templates": [{"path": "spec.t", "replicas": ["spec.n"]}]}, id="replicas"),
    ],
)
def test_workload_kinds_too(change):
    document = {**WORKLOAD, "spec": {**WORKLOAD["spec"], **change}}
    assert VALIDATOR.is_valid(document) == loads(document)
