"""Generated ValidatingAdmissionPolicies judged, and MutatingAdmissionPolicies applied, here as
the API server does, with the engine's CEL: the fast tests' stand-in for the real API server
(tests/e2e/test_native.py and test_native_runtime.py have that)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch

from policies.model.cel import CelEvaluationError, CelInput, compile_expression
from policies.model.selectors import parse_selector
from policies.native.runtime_map import MUTATION


def cel_input(pod: Mapping[str, Any], namespace: str, namespace_labels: Mapping[str, str] | None = None) -> CelInput:
    labels = {"kubernetes.io/metadata.name": namespace, **(namespace_labels or {})}
    request = {"namespace": namespace, "operation": "CREATE", "userInfo": {"username": "alice", "groups": []}}
    return CelInput(
        {"object": pod, "request": request, "namespaceObject": {"metadata": {"name": namespace, "labels": labels}}}
    )


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    return selector is None or parse_selector(selector, "selector").matches(labels)


def _bound(
    spec: Mapping[str, Any], binding: Mapping[str, Any], pod: Mapping[str, Any], ns_labels: Mapping[str, str]
) -> bool:
    """Whether the API server sends `pod` to the policy `spec` through `binding`: the policy's
    namespaceSelector, then the binding's matchResources (namespace and object selectors)."""
    resources = binding.get("matchResources", {})
    return (
        _selects(spec["matchConstraints"].get("namespaceSelector"), ns_labels)
        and _selects(resources.get("namespaceSelector"), ns_labels)
        and _selects(resources.get("objectSelector"), pod.get("metadata", {}).get("labels", {}))
    )


def _variables(spec: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((v["name"], compile_expression(v["expression"])) for v in spec.get("variables", ()))


def denials(
    objects: Sequence[Mapping[str, Any]],
    pod: Mapping[str, Any],
    namespace: str,
    namespace_labels: Mapping[str, str] | None = None,
) -> list[str]:
    """What the Deny-bound policies of `objects` say of creating `pod` in `namespace`: one message
    per failed validation (its messageExpression's, or its message where that fails, as the API
    server does); an error in a condition or a validation is a denial (failurePolicy Fail)."""
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    data = cel_input(pod, namespace, namespace_labels)
    ns_labels = {"kubernetes.io/metadata.name": namespace, **(namespace_labels or {})}
    said: list[str] = []
    kept = []  # CelInput keeps a policy's variables' values by the id of their tuple: keep each alive
    for binding in (o["spec"] for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"):
        if "Deny" not in binding["validationActions"]:
            continue
        spec = policies[binding["policyName"]]
        if not _bound(spec, binding, pod, ns_labels):
            continue
        variables = _variables(spec)
        kept.append(variables)
        try:
            if not all(compile_expression(c["expression"]).evaluate_bool(data) for c in spec["matchConditions"]):
                continue
            for validation in spec["validations"]:
                if compile_expression(validation["expression"]).evaluate_bool(data, variables):
                    continue
                try:
                    message = compile_expression(validation["messageExpression"]).evaluate(data, variables)
                except (CelEvaluationError, KeyError, ValueError):
                    message = validation["message"]
                said.append(str(message))
        except CelEvaluationError as error:
            said.append(f"{binding['policyName']}: error: {error}")
    return said


def mutated(
    objects: Sequence[Mapping[str, Any]],
    pod: Mapping[str, Any],
    namespace: str,
    namespace_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """`pod` as the MutatingAdmissionPolicies of `objects` leave it on CREATE in `namespace`, as
    the API server applies them: binding selectors, the matchConditions, the variables in order,
    then the JSON patch the last variable (`patches`) holds, each policy seeing the last one's
    result; an error leaves the pod as it was (failurePolicy Ignore)."""
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "MutatingAdmissionPolicy"}
    ns_labels = {"kubernetes.io/metadata.name": namespace, **(namespace_labels or {})}
    current: dict[str, Any] = json.loads(json.dumps(pod))
    for binding in (o["spec"] for o in objects if o["kind"] == "MutatingAdmissionPolicyBinding"):
        spec = policies[binding["policyName"]]
        assert spec["failurePolicy"] == "Ignore", "an error here leaves the pod alone"
        assert spec["mutations"] == [{"patchType": "JSONPatch", "jsonPatch": {"expression": MUTATION}}]
        if not _bound(spec, binding, current, ns_labels):
            continue
        data = cel_input(current, namespace, namespace_labels)
        variables = _variables(spec)
        try:
            if not all(compile_expression(c["expression"]).evaluate_bool(data) for c in spec["matchConditions"]):
                continue
            patches = data.variable_values(variables).get("patches")  # None: a variable failed
        except CelEvaluationError:
            continue
        if patches is None:
            continue
        current = jsonpatch.apply_patch(current, [dict(p) for p in patches])
    return current
