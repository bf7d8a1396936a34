"""The GPUPolicy CRD's schema is structural, as the API server demands of every CRD (a type on
each node, nothing but Kubernetes' own JSON Schema words, RE2 patterns), and says of each field
what the shipped JSON Schema says of it. The real API server accepting it is the e2e suite's
(tests/e2e/test_gpupolicies.py)."""

from __future__ import annotations

from typing import Any

from tools.gpupolicy_crd import NOT_RE2, crd
from tools.policy_schema.schema import gpupolicy_schema

WORDS = {
    *("type", "description", "enum", "required", "nullable", "pattern", "format"),
    *("minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems"),
    *("properties", "items", "additionalProperties"),
    *("x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys"),
}


def nodes(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, child in node.get("properties", {}).items():
        found += nodes(child, f"{path}.{name}")
    for word in ("items", "additionalProperties"):
        if isinstance(node.get(word), dict):
            found += nodes(node[word], f"{path}[]")
    return found


SCHEMA = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_every_node_is_structural():
    for path, node in nodes(SCHEMA):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        assert set(node) <= WORDS, (path, set(node) - WORDS)
        assert not ("properties" in node and "additionalProperties" in node), path
        assert not any(bad in node.get("pattern", "") for bad in NOT_RE2), path


def test_each_field_of_the_json_schema_is_a_field_of_the_crd():
    def fields(node: dict[str, Any], path: str = "") -> set[str]:
        branch = next((b for b in node.get("anyOf", ()) if b.get("type") != "null"), node)
        found = {path}
        for name, child in branch.get("properties", {}).items():
            found |= fields(child, f"{path}.{name}")
        if isinstance(branch.get("items"), dict):
            found |= fields(branch["items"], f"{path}[]")
        return found

    policy = next(b for b in gpupolicy_schema()["oneOf"] if b.get("title") == "GPUPolicy")
    expected = fields(policy["properties"]["spec"])
    assert len(expected) > 50
    assert expected <= {path for path, _ in nodes(SCHEMA["properties"]["spec"])}


def test_optional_fields_take_null_as_the_loader_does_and_defaults_are_said_not_applied():
    mig = SCHEMA["properties"]["spec"]["properties"]["mig"]
    assert mig["nullable"] is True and mig["type"] == "object"
    strategy = mig["properties"]["strategy"]
    assert strategy["enum"] == ["mixed", "single"] and "(default: mixed)" in strategy["description"]
    assert not [path for path, node in nodes(SCHEMA) if "default" in node]


def test_ready_and_in_force_are_what_kubectl_get_shows():
    version = crd()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["In Force"] == ".status.inForce"
