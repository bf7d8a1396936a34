"""The GPUPolicy CustomResourceDefinition, from the JSON Schema the loader is held to
(tools.policy_schema.schema): `deploy/base/gpupolicy-crd.yaml` and the chart's `files/` copy.

A CRD's schema must be structural (Kubernetes' "specifying a structural schema"): a type on every
node, no type, default, description or nullable inside anyOf, no additionalProperties beside
properties (unknown fields are pruned, and `kubectl apply` refuses them under field validation
Strict), regular expressions in RE2, and only Kubernetes' subset of JSON Schema. The conversion
keeps what the API server can check on its own (types, enums, lengths, minimums, required
fields, RE2 patterns) and leaves the rest (cross-field rules, CEL that compiles, profiles the
models lack, quantities' grammar) to the webhook, which judges every GPUPolicy with the same
loader as a policy ConfigMap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tools.policy_schema.schema import gpupolicy_schema

ROOT = Path(__file__).resolve().parent.parent
KUSTOMIZE = ROOT / "deploy" / "base" / "gpupolicy-crd.yaml"
HELM = ROOT / "charts" / "gpu-admission" / "files" / "gpupolicy-crd.yaml"
Node = dict[str, Any]
# JSON Schema words a CRD's schema has; the rest (x-kind, $schema, const, if/then/else,
# propertyNames, draft 2020's numeric exclusiveMinimum) are converted or dropped.
KEPT = (
    *("description", "enum", "required", "x-kubernetes-int-or-string"),
    *("minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems"),
)
# Look-arounds and back-references: not RE2, which the API server compiles patterns with.
NOT_RE2 = ("(?=", "(?!", "(?<=", "(?<!", "\\1")


def structural(node: Node) -> Node:
    """One JSON Schema node as a structural CRD schema node."""
    branches = [b for b in node.get("anyOf", ()) if b.get("type") != "null"]
    nullable = len(branches) < len(node.get("anyOf", ()))
    if branches:
        out = _one_of_types(branches)
        for word in ("description", "default", "x-kind"):
            if word in node:
                out.setdefault(word, node[word])
        out = structural(out)
        if nullable:
            out["nullable"] = True
        return out
    out = {word: node[word] for word in KEPT if word in node}
    if "const" in node:
        out["enum"] = [node["const"]]
    kind = node.get("type") or _enum_type(out.get("enum"))
    if kind:
        out["type"] = kind
    if "pattern" in node and not any(bad in node["pattern"] for bad in NOT_RE2):
        out["pattern"] = node["pattern"]
    if "default" in node:
        out["description"] = _with_default(out.get("description", ""), node["default"])
    if "properties" in node:
        out["properties"] = {name: structural(child) for name, child in node["properties"].items()}
    elif isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = structural(node["additionalProperties"])
    if "items" in node:
        out["items"] = structural(node["items"])
    if out.get("description") == "":
        del out["description"]
    return dict(sorted(out.items()))


def _one_of_types(branches: list[Node]) -> Node:
    """A node of one type, or Kubernetes' int-or-string where a field takes a number or a string
    (a quantity, an exact amount: written as strings, the webhook checks their grammar)."""
    if len(branches) == 1:
        return dict(branches[0])
    flat = [leaf for b in branches for leaf in (b.get("anyOf") or [b])]
    kinds = {leaf.get("type") for leaf in flat}
    if kinds <= {"integer", "number", "string"} and "string" in kinds:
        return {"x-kubernetes-int-or-string": True}
    raise ValueError(f"no structural form for a field of types {sorted(map(str, kinds))}")


def _enum_type(values: list[Any] | None) -> str | None:
    if values and all(isinstance(v, str) for v in values):
        return "string"
    return None


def _with_default(description: str, default: Any) -> str:
    shown = yaml.safe_dump(default, default_flow_style=True).strip().removesuffix("...").strip()
    return f"{description} (default: {shown})".strip()


STATUS: Node = {
    "type": "object",
    "description": "how the webhook loaded this policy (written by its status leader)",
    "properties": {
        "observedGeneration": {"type": "integer", "format": "int64"},
        "inForce": {
            "type": "string",
            "enum": ["current", "lastGood", "none"],
            "description": "which version is in force: this one, the last that loaded, or none (the "
            "pods it matches are denied until it loads)",
        },
        "lastGood": {
            "type": "string",
            "description": "the last version that loaded, as the policy document: what a replica that "
            "starts while this one is broken keeps in force",
        },
        "conditions": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "required": ["type", "status"],
                "properties": {
                    "type": {"type": "string"},
                    "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    "reason": {"type": "string"},
                    "message": {"type": "string"},
                    "observedGeneration": {"type": "integer", "format": "int64"},
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                },
            },
        },
    },
}

READY = '.status.conditions[?(@.type=="Ready")]'
COLUMNS = [
    {"name": "Ready", "type": "string", "jsonPath": f"{READY}.status"},
    {"name": "In Force", "type": "string", "jsonPath": ".status.inForce"},
    {"name": "Reason", "type": "string", "jsonPath": f"{READY}.reason", "priority": 1},
    {"name": "Priority", "type": "integer", "jsonPath": ".spec.priority"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd() -> Node:
    policy = next(b for b in gpupolicy_schema()["oneOf"] if b.get("title") == "GPUPolicy")
    spec = structural(policy["properties"]["spec"])
    spec["description"] = "the policy, as a policy ConfigMap's GPUPolicy document says it (docs/policy-fields.md)"
    schema = {
        "type": "object",
        "description": "A GPU admission policy: MIG rewrite, runtime settings, Triton sidecar, rules and quota.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": STATUS,
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "gpupolicies.gpu-admission.io",
            "labels": {"app.kubernetes.io/name": "gpu-admission", "app.kubernetes.io/part-of": "gpu-admission"},
        },
        "spec": {
            "group": "gpu-admission.io",
            "scope": "Cluster",
            "names": {
                "kind": "GPUPolicy",
                "listKind": "GPUPolicyList",
                "plural": "gpupolicies",
                "singular": "gpupolicy",
                "shortNames": ["gpupol"],
                "categories": ["gpu-admission"],
            },
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": COLUMNS,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


HEADER = (
    "# Generated by tools/gpupolicy_crd.py from the GPUPolicy JSON Schema (python -m tools.generate).\n"
    "# GPUPolicy objects: cluster-wide policies beside the policy ConfigMaps, loaded by the same loader.\n"
)


def outputs() -> dict[Path, str]:
    text = HEADER + yaml.safe_dump(crd(), sort_keys=False, width=100, allow_unicode=True)
    assert "{{" not in text, "the chart reads this file through Helm's template engine"
    return {KUSTOMIZE: text, HELM: text}
