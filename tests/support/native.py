"""Generated ValidatingAdmissionPolicies judged here, as the API server judges them, with the
engine's CEL: the fast tests' stand-in for the real API server (tests/e2e/test_native.py has that)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.model.cel import CelEvaluationError, CelInput, compile_expression
from policies.model.selectors import parse_selector


def cel_input(pod: Mapping[str, Any], namespace: str, namespace_labels: Mapping[str, str] | None = None) -> CelInput:
    labels = {"kubernetes.io/metadata.name": namespace, **(namespace_labels or {})}
    request = {"namespace": namespace, "operation": "CREATE", "userInfo": {"username": "alice", "groups": []}}
    return CelInput(
        {"object": pod, "request": request, "namespaceObject": {"metadata": {"name": namespace, "labels": labels}}}
    )


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    return selector is None or parse_selector(selector, "selector").matches(labels)


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
        resources = binding.get("matchResources", {})
        if not _selects(spec["matchConstraints"].get("namespaceSelector"), ns_labels):
            continue
        pod_labels = pod.get("metadata", {}).get("labels", {})
        if not _selects(resources.get("namespaceSelector"), ns_labels):
            continue
        if not _selects(resources.get("objectSelector"), pod_labels):
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
