"""The JSON Schema of GPUPolicy and WorkloadKind documents, built from what the loader reads.

Shipped as `policies/model/gpupolicy.schema.json` (editors: `# yaml-language-server: $schema=...`,
kubeconform-style tools) and rendered into docs/policy-fields.md; tests keep both equal to what
this module builds and hold the schema and the loader to the same answers.

What a schema checks is each field on its own: its type, its enum, its grammar (Kubernetes
quantities, exact amounts), unknown fields. What depends on two fields or on running code stays
the loader's and lint's: a profile the listed models lack, defaultProfile outside
allowedProfiles, CEL that does not compile, variables used before they are declared, duplicate
names. As in the loader, `null` stands for an absent optional field.
"""

from __future__ import annotations

from typing import Any

from policies.gpu.catalog import CATALOG, Catalog
from policies.model.fields import AMOUNT_PATTERN

Schema = dict[str, Any]
SCHEMA_ID = "https://gpu-admission.io/schemas/v1alpha1/gpupolicy.schema.json"
API_VERSION = "gpu-admission.io/v1alpha1"

# Kubernetes quantities above zero (apimachinery's grammar; "0", "0Gi" and the like excluded).
QUANTITY = (
    r"^(?![+]?0*(\.0*)?([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$)"
    r"[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$"
)
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _doc(schema: Schema, kind: str, description: str, default: Any = None) -> Schema:
    schema = {**schema, "description": description, "x-kind": kind}
    if default is not None:
        schema["default"] = default
    return schema


_ANNOTATIONS = ("description", "x-kind", "default")


def _nullable(schema: Schema) -> Schema:
    """The schema, or null (the loader reads a null optional field as absent)."""
    bare = {k: v for k, v in schema.items() if k not in _ANNOTATIONS}
    notes = {k: v for k, v in schema.items() if k in _ANNOTATIONS}
    return {"anyOf": [bare, {"type": "null"}], **notes}


def _object(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def _string() -> Schema:
    return {"type": "string", "minLength": 1}


def _strings() -> Schema:
    return {"type": "array", "items": _string()}


def _string_map() -> Schema:
    return {"type": "object", "additionalProperties": {"type": "string"}}


def _enum(*values: str) -> Schema:
    return {"enum": list(values)}


def _count() -> Schema:
    return {"type": "integer", "minimum": 0}


def _amount() -> Schema:
    return {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": AMOUNT_PATTERN}]}


def _quantity() -> Schema:
    return {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": QUANTITY}]}


def _selector() -> Schema:
    expression = _object(
        {
            "key": {"type": "string"},
            "operator": _enum("In", "NotIn", "Exists", "DoesNotExist"),
            "values": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        },
        ("key", "operator"),
    )
    # In and NotIn need values; Exists and DoesNotExist take none (metav1.LabelSelector's rules).
    expression["allOf"] = [
        {
            "if": {"properties": {"operator": _enum("In", "NotIn")}},
            "then": {"properties": {"values": {"type": "array", "minItems": 1}}, "required": ["values"]},
            "else": {"properties": {"values": {"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 0}]}}},
        }
    ]
    return _object(
        {
            "matchLabels": _nullable({"type": "object", "additionalProperties": {"type": "string"}}),
            "matchExpressions": _nullable({"type": "array", "items": expression}),
        }
    )


def _opt(schema: Schema, kind: str, description: str, default: Any = None) -> Schema:
    return _nullable(_doc(schema, kind, description, default))


def _limits(profiles: list[str], scope: str) -> Schema:
    slices = {"type": "object", "propertyNames": _enum(*profiles), "additionalProperties": _nullable(_count())}
    return _object(
        {
            "gpuEquivalents": _opt(
                _amount(), "decimal or fraction", f"{scope}; profile weight = g / slices of its GPU, whole GPU = 1"
            ),
            "slices": _opt(slices, "map of profile to integer", f"{scope}: slices per profile"),
            "gpus": _opt(_count(), "integer", f"{scope}: whole GPUs"),
            "pods": _opt(_count(), "integer", f"{scope}: pods that hold any GPU resource"),
        }
    )


def _mig(models: list[str], profiles: list[str]) -> Schema:
    profile = {"enum": profiles}
    return _object(
        {
            "strategy": _opt(
                _enum("mixed", "single"),
                "`mixed` | `single`",
                "mixed: `nvidia.com/mig-<profile>` resources; single: `nvidia.com/gpu` steered to nodes split into "
                "the profile",
                "mixed",
            ),
            "gpuModels": _opt(
                {"type": "array", "items": {"enum": models}},
                "list of catalog keys",
                "allowed models, in order of preference (README, Supported GPUs); none: every model",
            ),
            "defaultProfile": _opt(
                profile, "profile", "for GPU containers that name no profile or memory; without it whole GPUs stay"
            ),
            "allowedProfiles": _opt(
                {"type": "array", "items": profile},
                "list of profiles",
                "the gate every MIG request meets, named directly or rewritten; none: all of the models'",
            ),
            "multiGpu": _opt(
                _enum("keep", "deny"),
                "`keep` | `deny`",
                "`nvidia.com/gpu: N > 1`: kept whole with a warning, or denied",
                "keep",
            ),
        }
    )


def _runtime() -> Schema:
    toleration = _object(
        {
            "key": _opt({"type": "string"}, "string", "the taint's key"),
            "operator": _opt(_enum("Equal", "Exists"), "`Equal` | `Exists`", "", "Equal"),
            "value": _opt({"type": "string"}, "string", "the taint's value"),
            "effect": _opt(
                _enum("NoSchedule", "PreferNoSchedule", "NoExecute"), "effect", "the taint's effect; none: all"
            ),
            "tolerationSeconds": _opt({"type": "integer"}, "integer", "NoExecute only"),
        }
    )
    return _object(
        {
            "runtimeClassName": _opt(_string(), "string", "set where the pod has none"),
            "tolerations": _opt(
                {"type": "array", "items": _nullable(toleration)}, "list", "merged into the pod's, never duplicated"
            ),
            "nodeSelector": _opt(_string_map(), "map of strings", "keys the pod does not set"),
            "env": _opt(
                _string_map(),
                "map of strings",
                "set in GPU containers where they set none (never `NVIDIA_VISIBLE_DEVICES` & co.)",
            ),
            "shmSize": _opt(_quantity(), "quantity", "a memory-backed `/dev/shm` of that size"),
        }
    )


def _triton(profiles: list[str]) -> Schema:
    resources = _object(
        {
            "cpu": _opt(_quantity(), "quantity", "CPU request (no CPU limit: it would throttle model loading)", "1"),
            "memory": _opt(_quantity(), "quantity", "memory request and limit", "4Gi"),
        }
    )
    return _object(
        {
            "image": _opt(_string(), "string", "the server's image", "nvcr.io/nvidia/tritonserver:24.08-py3"),
            "modelRepository": _opt(_string(), "string", "`--model-repository`; the pod's annotation wins"),
            "profile": _opt({"enum": profiles}, "profile", "the sidecar's own MIG slice"),
            "nativeSidecar": _opt(
                {"type": "boolean"},
                "boolean",
                "an init container with `restartPolicy: Always` (Kubernetes 1.29+)",
                False,
            ),
            "resources": _opt(resources, "mapping", "what the scheduler reserves for the server besides its slice"),
        }
    )


def _cel(description: str) -> Schema:
    return _doc(_string(), "CEL", description)


def _rules() -> Schema:
    rule = _object(
        {
            "name": _doc(_string(), "string", "unique in the policy"),
            "expression": _cel("true: the pod passes; false or an evaluation error: the action"),
            "message": _opt(_string(), "string", "what a denial or warning says", "rule <name> failed"),
            "messageExpression": _opt(_string(), "CEL", "a string computed from the object"),
            "action": _opt(_enum("deny", "warn", "audit"), "`deny` | `warn` | `audit`", "", "deny"),
        },
        ("name", "expression"),
    )
    return {"type": "array", "items": rule}


def _variables() -> Schema:
    variable = _object(
        {
            "name": _doc({"type": "string", "pattern": IDENTIFIER}, "CEL identifier", "unique in the policy"),
            "expression": _cel("may read earlier variables; one that fails fails the expressions that read it"),
        },
        ("name", "expression"),
    )
    return {"type": "array", "items": variable}


def _quota(profiles: list[str]) -> Schema:
    return _object(
        {
            "scope": _opt(
                _enum("namespace", "policy"),
                "`namespace` | `policy`",
                "a budget per matched namespace, or one shared by the policy",
                "namespace",
            ),
            "limits": _opt(_limits(profiles, "the budget"), "mapping", "the budget's dimensions"),
            "perPod": _opt(_limits(profiles, "for one pod"), "mapping", "the same dimensions, for one pod"),
            "action": _opt(_enum("deny", "warn"), "`deny` | `warn`", "", "deny"),
            "consistency": _opt(
                _enum("strict", "local"),
                "`strict` | `local`",
                "strict: exact across replicas (Lease compare-and-swap); local: faster, may overshoot within the "
                "watch delay",
                "strict",
            ),
            "sharedWeight": _opt(
                _amount(), "decimal or fraction, 0 to 1", "what a share of a device (time-slicing, HAMi) weighs", "1"
            ),
        }
    )


def _match() -> Schema:
    return _object(
        {
            "namespaces": _opt(_strings(), "list of globs", "namespace names, `*` and `?` wildcards; none: all"),
            "podSelector": _opt(_selector(), "label selector", "over the pod's labels"),
            "namespaceSelector": _opt(
                _selector(), "label selector", "over the namespace's labels, as the webhook's cluster view knows them"
            ),
            "condition": _opt(
                _string(), "CEL", "over `object`, `oldObject`, `request`, `namespaceObject` (not `variables`)"
            ),
        }
    )


def _security() -> Schema:
    return _object(
        {
            "action": _opt(_enum("deny", "warn", "audit"), "`deny` | `warn` | `audit`", "", "deny"),
            "allow": _opt(
                {"type": "array", "items": _enum("deviceEnv", "envFrom", "hostDevices", "cdiDevices")},
                "list",
                "checks this policy's pods may pass",
            ),
        }
    )


def gpupolicy_schema(catalog: Catalog = CATALOG) -> Schema:
    models = [m.key for m in catalog.models]
    profiles = sorted({p.name for m in catalog.models for p in m.profiles})
    spec = _object(
        {
            "priority": _doc(
                {"type": "integer"},
                "integer",
                "where several policies match, the highest decides the MIG rewrite and Triton and wins each "
                "runtime key; ties by name",
                0,
            ),
            "match": _opt(_match(), "mapping", "every criterion given must hold; none: every pod"),
            "mig": _opt(_mig(models, profiles), "mapping", "how `nvidia.com/gpu` requests become MIG slices"),
            "runtime": _opt(_runtime(), "mapping", "settings for GPU pods and their GPU containers"),
            "triton": _opt(_triton(profiles), "mapping", "the sidecar added on `gpu-admission.io/triton: inject`"),
            "variables": _opt(
                _variables(),
                "list",
                "named CEL expressions, each computed once per request, read as `variables.<name>` by rules, "
                "messages and later variables (as in VAP)",
            ),
            "rules": _opt(_rules(), "list", "CEL rules, each judged on every matched GPU pod"),
            "quota": _opt(_quota(profiles), "mapping", "a GPU budget"),
            "security": _opt(_security(), "mapping", "GPU device access past the device plugin (default: denied)"),
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
        "properties": {"name": _doc(_string(), "string", "the document's name, in every denial and warning")},
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
            "spec": _nullable(spec),
        },
        "required": ["apiVersion", "kind", "metadata"],
        "additionalProperties": False,
    }


def _workload_kind() -> Schema:
    site = _object(
        {
            "path": _doc(_string(), "dotted path", "`*` for every item of a list or value of a map"),
            "form": _doc(
                _enum("template", "podspec", "container"),
                "`template` | `podspec` | `container`",
                "a PodTemplateSpec, a pod spec inline, or one container",
                "template",
            ),
            "replicas": _opt(
                {"type": "array", "items": _string()},
                "list of dotted paths",
                "whole numbers that multiply into the pods the site makes",
            ),
        },
        ("path",),
    )
    spec = _object(
        {
            "group": _doc({"type": "string"}, "string", 'the API group (`""`: core)', ""),
            "kind": _doc(_string(), "string", "the kind of object"),
            "resource": _doc({"type": "string"}, "string", "the plural the API server serves it as", ""),
            "templates": _doc(
                {"type": "array", "items": site, "minItems": 1}, "list", "the sites of its pod templates"
            ),
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
