"""The JSON Schema of GPUPolicy and WorkloadKind documents, built from what the loader reads.

Shipped as `policies/model/gpupolicy.schema.json` (editors: `# yaml-language-server: $schema=...`,
kubeconform-style tools) and rendered into docs/policy-fields.md; tests keep both equal to what
this module builds and hold the schema and the loader to the same answers.

What a schema checks is each field on its own: its type, its enum, its grammar (Kubernetes
quantities, exact amounts), unknown fields. What depends on two fields or on running code stays
the loader's and lint's: a profile the listed models lack, defaultProfile outside
allowedProfiles, CEL that does not compile, variables used before they are declared, duplicate
names, a quota whose match condition reads what only an admission has. As in the loader, `null`
stands for an absent optional field.
"""

from __future__ import annotations

from policies.gpu.catalog import CATALOG, Catalog
from tools.policy_schema.fields import (
    Schema,
    documented,
    enum_of,
    match_schema,
    mig_schema,
    nullable,
    object_of,
    optional,
    quota_schema,
    rules_schema,
    runtime_schema,
    security_schema,
    string,
    triton_schema,
    variables_schema,
)

SCHEMA_ID = "https://gpu-admission.io/schemas/v1alpha1/gpupolicy.schema.json"
API_VERSION = "gpu-admission.io/v1alpha1"


def gpupolicy_schema(catalog: Catalog = CATALOG) -> Schema:
    models = [m.key for m in catalog.models]
    profiles = sorted({p.name for m in catalog.models for p in m.profiles})
    spec = object_of(
        {
            "priority": documented(
                {"type": "integer"},
                "integer",
                "where several policies match, the highest decides the MIG rewrite and Triton and wins each "
                "runtime key; ties by name",
                0,
            ),
            "match": optional(match_schema(), "mapping", "every criterion given must hold; none: every pod"),
            "mig": optional(mig_schema(models, profiles), "mapping", "how `nvidia.com/gpu` requests become MIG slices"),
            "runtime": optional(runtime_schema(), "mapping", "settings for GPU pods and their GPU containers"),
            "triton": optional(
                triton_schema(profiles), "mapping", "the sidecar added on `gpu-admission.io/triton: inject`"
            ),
            "variables": optional(
                variables_schema(),
                "list",
                "named CEL expressions, each computed once per request, read as `variables.<name>` by rules, "
                "messages and later variables (as in VAP)",
            ),
            "rules": optional(rules_schema(), "list", "CEL rules, each judged on every matched GPU pod"),
            "quota": optional(quota_schema(profiles), "mapping", "a GPU budget"),
            "security": optional(
                security_schema(), "mapping", "GPU device access past the device plugin (default: denied)"
            ),
        }
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "GPUPolicy and WorkloadKind (gpu-admission.io/v1alpha1)",
        "oneOf": [_gpupolicy(spec), _workload_kind()],
    }


def _metadata() -> Schema:
    return {
        "type": "object",
        "properties": {"name": documented(string(), "string", "the document's name, in every denial and warning")},
        "required": ["name"],
    }


def _gpupolicy(spec: Schema) -> Schema:
    return {
        "title": "GPUPolicy",
        "type": "object",
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": "GPUPolicy"},
            "metadata": _metadata(),
            "spec": nullable(spec),
        },
        "required": ["apiVersion", "kind", "metadata"],
        "additionalProperties": False,
    }


def _workload_kind() -> Schema:
    site = object_of(
        {
            "path": documented(string(), "dotted path", "`*` for every item of a list or value of a map"),
            "form": documented(
                enum_of("template", "podspec", "container", "resources"),
                "`template` | `podspec` | `container` | `resources`",
                "a PodTemplateSpec, a pod spec inline, one container, or what an operator's pod asks "
                "(a ResourceRequirements, or a map with a bare `gpu` count)",
                "template",
            ),
            "replicas": optional(
                {"type": "array", "items": string()},
                "list of dotted paths",
                "whole numbers that multiply into the pods the site makes",
            ),
            "pod": optional(
                string(), "dotted path", "`resources` sites: the object holding the pods' nodeSelector, tolerations"
            ),
        },
        ("path",),
    )
    spec = object_of(
        {
            "group": documented({"type": "string"}, "string", 'the API group (`""`: core)', ""),
            "kind": documented(string(), "string", "the kind of object"),
            "resource": documented({"type": "string"}, "string", "the plural the API server serves it as", ""),
            "templates": documented(
                {"type": "array", "items": site, "minItems": 1}, "list", "the sites of its pod templates"
            ),
            "madeBy": optional(string(), "string", "who makes its pods, where an operator builds them"),
            "clusterScoped": optional({"type": "boolean"}, "boolean", "a cluster-scoped kind (webhook rules)"),
        },
        ("kind", "templates"),
    )
    return {
        "title": "WorkloadKind",
        "type": "object",
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": "WorkloadKind"},
            "metadata": _metadata(),
            "spec": spec,
        },
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
    }
