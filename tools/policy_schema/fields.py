"""The pieces of the GPUPolicy JSON Schema (tools.policy_schema.schema): one builder per spec section,
and the primitives they share (a documented field, a nullable one, quantities, exact amounts)."""

from __future__ import annotations

from typing import Any

from policies.model.fields import AMOUNT_PATTERN

Schema = dict[str, Any]

# Kubernetes quantities above zero (apimachinery's grammar; "0", "0Gi" and the like excluded).
QUANTITY = (
    r"^(?![+]?0*(\.0*)?([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$)"
    r"[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$"
)
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"


def documented(schema: Schema, kind: str, description: str, default: Any = None) -> Schema:
    schema = {**schema, "description": description, "x-kind": kind}
    if default is not None:
        schema["default"] = default
    return schema


_ANNOTATIONS = ("description", "x-kind", "default")


def nullable(schema: Schema) -> Schema:
    """The schema, or null (the loader reads a null optional field as absent)."""
    bare = {k: v for k, v in schema.items() if k not in _ANNOTATIONS}
    notes = {k: v for k, v in schema.items() if k in _ANNOTATIONS}
    return {"anyOf": [bare, {"type": "null"}], **notes}


def object_of(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def string() -> Schema:
    return {"type": "string", "minLength": 1}


def _strings() -> Schema:
    return {"type": "array", "items": string()}


def _string_map() -> Schema:
    return {"type": "object", "additionalProperties": {"type": "string"}}


def enum_of(*values: str) -> Schema:
    return {"enum": list(values)}


def _count() -> Schema:
    return {"type": "integer", "minimum": 0}


def _amount() -> Schema:
    return {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": AMOUNT_PATTERN}]}


def _quantity() -> Schema:
    return {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": QUANTITY}]}


def _selector() -> Schema:
    expression = object_of(
        {
            "key": {"type": "string"},
            "operator": enum_of("In", "NotIn", "Exists", "DoesNotExist"),
            "values": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        },
        ("key", "operator"),
    )
    # In and NotIn need values; Exists and DoesNotExist take none (metav1.LabelSelector's rules).
    expression["allOf"] = [
        {
            "if": {"properties": {"operator": enum_of("In", "NotIn")}},
            "then": {"properties": {"values": {"type": "array", "minItems": 1}}, "required": ["values"]},
            "else": {"properties": {"values": {"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 0}]}}},
        }
    ]
    return object_of(
        {
            "matchLabels": nullable({"type": "object", "additionalProperties": {"type": "string"}}),
            "matchExpressions": nullable({"type": "array", "items": expression}),
        }
    )


def optional(schema: Schema, kind: str, description: str, default: Any = None) -> Schema:
    return nullable(documented(schema, kind, description, default))


def _limits(profiles: list[str], scope: str) -> Schema:
    slices = {"type": "object", "propertyNames": enum_of(*profiles), "additionalProperties": nullable(_count())}
    return object_of(
        {
            "gpuEquivalents": optional(
                _amount(), "decimal or fraction", f"{scope}; profile weight = g / slices of its GPU, whole GPU = 1"
            ),
            "slices": optional(slices, "map of profile to integer", f"{scope}: slices per profile"),
            "gpus": optional(_count(), "integer", f"{scope}: whole GPUs"),
            "pods": optional(_count(), "integer", f"{scope}: pods that hold any GPU resource"),
        }
    )


def mig_schema(models: list[str], profiles: list[str]) -> Schema:
    profile = {"enum": profiles}
    return object_of(
        {
            "strategy": optional(
                enum_of("mixed", "single"),
                "`mixed` | `single`",
                "mixed: `nvidia.com/mig-<profile>` resources; single: `nvidia.com/gpu` steered to nodes split into "
                "the profile",
                "mixed",
            ),
            "gpuModels": optional(
                {"type": "array", "items": {"enum": models}},
                "list of catalog keys",
                "allowed models, in order of preference (README, Supported GPUs); none: every model",
            ),
            "defaultProfile": optional(
                profile, "profile", "for GPU containers that name no profile or memory; without it whole GPUs stay"
            ),
            "allowedProfiles": optional(
                {"type": "array", "items": profile},
                "list of profiles",
                "the gate every MIG request meets, named directly or rewritten; none: all of the models'",
            ),
            "multiGpu": optional(
                enum_of("keep", "deny"),
                "`keep` | `deny`",
                "`nvidia.com/gpu: N > 1`: kept whole with a warning, or denied",
                "keep",
            ),
            "backend": optional(
                enum_of("auto", "devicePlugin", "draExtendedResource", "draClaim"),
                "`auto` | `devicePlugin` | `draExtendedResource` | `draClaim`",
                "how the slice reaches the container (docs/mig-backends.md): `nvidia.com/mig-<profile>` from the "
                "device plugin or from a DeviceClass serving that name, or a ResourceClaim whose request is a "
                "`firstAvailable` ladder of profiles; `auto` picks per pod from what the cluster shows",
                "auto",
            ),
            "wholeGpuFallback": optional(
                {"type": "boolean"},
                "boolean",
                "`draClaim`: a ladder ends with a whole GPU, taken where no allowed slice is free",
                False,
            ),
            "dualAdvertisedNodes": optional(
                enum_of("allow", "warn", "avoid"),
                "`allow` | `warn` | `avoid`",
                "GPU pods and nodes whose GPUs both the device plugin and NVIDIA's DRA driver advertise (either "
                "may hand out a GPU the other did): nothing said, a warning naming them, or the pod kept off them "
                "(`kubernetes.io/hostname NotIn`); docs/dra.md",
                "allow",
            ),
        }
    )


def runtime_schema() -> Schema:
    toleration = object_of(
        {
            "key": optional({"type": "string"}, "string", "the taint's key"),
            "operator": optional(enum_of("Equal", "Exists"), "`Equal` | `Exists`", "", "Equal"),
            "value": optional({"type": "string"}, "string", "the taint's value"),
            "effect": optional(
                enum_of("NoSchedule", "PreferNoSchedule", "NoExecute"), "effect", "the taint's effect; none: all"
            ),
            "tolerationSeconds": optional({"type": "integer"}, "integer", "NoExecute only"),
        }
    )
    return object_of(
        {
            "runtimeClassName": optional(string(), "string", "set where the pod has none"),
            "tolerations": optional(
                {"type": "array", "items": nullable(toleration)}, "list", "merged into the pod's, never duplicated"
            ),
            "nodeSelector": optional(_string_map(), "map of strings", "keys the pod does not set"),
            "env": optional(
                _string_map(),
                "map of strings",
                "set in GPU containers where they set none (never `NVIDIA_VISIBLE_DEVICES` & co.)",
            ),
            "shmSize": optional(_quantity(), "quantity", "a memory-backed `/dev/shm` of that size"),
        }
    )


def triton_schema(profiles: list[str]) -> Schema:
    resources = object_of(
        {
            "cpu": optional(
                _quantity(), "quantity", "CPU request (no CPU limit: it would throttle model loading)", "1"
            ),
            "memory": optional(_quantity(), "quantity", "memory request and limit", "4Gi"),
        }
    )
    return object_of(
        {
            "image": optional(string(), "string", "the server's image", "nvcr.io/nvidia/tritonserver:24.08-py3"),
            "modelRepository": optional(string(), "string", "`--model-repository`; the pod's annotation wins"),
            "profile": optional({"enum": profiles}, "profile", "the sidecar's own MIG slice"),
            "nativeSidecar": optional(
                {"type": "boolean"},
                "boolean",
                "an init container with `restartPolicy: Always` (Kubernetes 1.29+)",
                False,
            ),
            "resources": optional(resources, "mapping", "what the scheduler reserves for the server besides its slice"),
        }
    )


def _cel(description: str) -> Schema:
    return documented(string(), "CEL", description)


def rules_schema() -> Schema:
    rule = object_of(
        {
            "name": documented(string(), "string", "unique in the policy"),
            "expression": _cel("true: the pod passes; false or an evaluation error: the action"),
            "message": optional(string(), "string", "what a denial or warning says", "rule <name> failed"),
            "messageExpression": optional(string(), "CEL", "a string computed from the object"),
            "action": optional(enum_of("deny", "warn", "audit"), "`deny` | `warn` | `audit`", "", "deny"),
        },
        ("name", "expression"),
    )
    return {"type": "array", "items": rule}


def variables_schema() -> Schema:
    variable = object_of(
        {
            "name": documented({"type": "string", "pattern": IDENTIFIER}, "CEL identifier", "unique in the policy"),
            "expression": _cel("may read earlier variables; one that fails fails the expressions that read it"),
        },
        ("name", "expression"),
    )
    return {"type": "array", "items": variable}


def quota_schema(profiles: list[str]) -> Schema:
    return object_of(
        {
            "scope": optional(
                enum_of("namespace", "policy"),
                "`namespace` | `policy`",
                "a budget per matched namespace, or one shared by the policy",
                "namespace",
            ),
            "limits": optional(_limits(profiles, "the budget"), "mapping", "the budget's dimensions"),
            "perPod": optional(_limits(profiles, "for one pod"), "mapping", "the same dimensions, for one pod"),
            "action": optional(enum_of("deny", "warn"), "`deny` | `warn`", "", "deny"),
            "consistency": optional(
                enum_of("strict", "local"),
                "`strict` | `local`",
                "strict: exact across replicas (Lease compare-and-swap); local: faster, may overshoot within the "
                "watch delay",
                "strict",
            ),
            "sharedWeight": optional(
                _amount(), "decimal or fraction, 0 to 1", "what a share of a device (time-slicing, HAMi) weighs", "1"
            ),
        }
    )


def match_schema() -> Schema:
    return object_of(
        {
            "namespaces": optional(_strings(), "list of globs", "namespace names, `*` and `?` wildcards; none: all"),
            "podSelector": optional(_selector(), "label selector", "over the pod's labels"),
            "namespaceSelector": optional(
                _selector(), "label selector", "over the namespace's labels, as the webhook's cluster view knows them"
            ),
            "condition": optional(
                string(), "CEL", "over `object`, `oldObject`, `request`, `namespaceObject` (not `variables`)"
            ),
        }
    )


def security_schema() -> Schema:
    return object_of(
        {
            "action": optional(enum_of("deny", "warn", "audit"), "`deny` | `warn` | `audit`", "", "deny"),
            "allow": optional(
                {
                    "type": "array",
                    "items": enum_of(
                        "deviceEnv",
                        "envFrom",
                        "hostDevices",
                        "cdiDevices",
                        "draAdminAccess",
                        "draDeviceTaints",
                        "draOpaqueConfig",
                    ),
                },
                "list",
                "checks this policy's pods and DRA claims may pass",
            ),
            "deviceClasses": optional(
                _strings(),
                "list",
                "the only DRA DeviceClasses a claim or pod may name (none: any); a namespaced policy narrows it",
            ),
        }
    )
