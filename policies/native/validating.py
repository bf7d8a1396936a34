"""A policy's CEL rules as ValidatingAdmissionPolicies the API server runs itself.

What needs no cluster state can be judged inside the API server, with no call out: a rule reads
only the object, the request and the namespace. Each policy with rules becomes, for pod CREATE:

- `gpu-admission.<policy>`, bound with `[Deny]`: its deny rules, and one guard per warn or audit
  rule that holds only if the rule can be evaluated (`(E) || !(E)` is an error exactly when E
  is one). The engine denies a rule that fails to evaluate whatever its action; a Warn binding
  would only warn of it.
- `gpu-admission.<policy>.warn` and `.audit`, bound with `[Warn]` and `[Audit]`.

Each is scoped as the webhook is: pods that could reach a GPU (policies.native.reach, the same
condition the validating webhook is sent them by), not a kubelet's mirror pod, outside the
control plane's and the GPU stack's namespaces; then the policy's own match: `podSelector` and
`namespaceSelector` (the binding's matchResources, which the API server evaluates with the same
selector semantics), and one matchCondition joining `namespaces` (globs, over the request's
namespace), the scope and `condition` with && in that order, so the condition is evaluated only
where the engine evaluates it (an error there denies, as in the engine, with failurePolicy
Fail). `variables` are VAP variables of the same names. Messages are the engine's: the rule's
message, `(policy <name>)`, and the rule and field path in brackets, on one line.

What stays with the webhook is listed per policy (`Uncovered`): MIG, runtime settings, Triton,
quotas and device-access checks, and rules on UPDATE and on ephemeral containers.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from policies.model.policy import Action, GPUPolicy, Rule
from policies.model.selectors import LabelSelector, Operator
from policies.native.reach import ANY_EXTENDED, EXCLUDED, MIRROR_PODS, NAMESPACE, pod_condition

API_VERSION = "admissionregistration.k8s.io/v1"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-admission", "gpu-admission.io/native": "true"}
POLICY_ANNOTATION = "gpu-admission.io/policy"
_BINDING_ACTIONS = {Action.DENY: "Deny", Action.WARN: "Warn", Action.AUDIT: "Audit"}
_SUFFIX = {Action.DENY: "", Action.WARN: ".warn", Action.AUDIT: ".audit"}
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_WHITESPACE = re.compile(r"\s+")
_NAME_ROOM = 200  # of 253: room for the prefix and the action's suffix
_LABEL_CHARACTERS = string.ascii_lowercase + string.digits + "-"  # all a namespace's name may hold
_NOTHING = "[^\\s\\S]"  # a set no character is in (RE2 has no lookahead)


@dataclass(frozen=True, slots=True)
class Uncovered:
    """A part of a policy the native policies leave to the webhook, and why."""

    policy: str
    part: str
    why: str

    def __str__(self) -> str:
        return f"policy {self.policy}: {self.part}: left to the webhook ({self.why})"


@dataclass(frozen=True, slots=True)
class NativePolicies:
    """The objects to apply (each policy, then its binding), the GPUPolicies they come from, and
    what they leave to the webhook."""

    objects: tuple[dict[str, object], ...]
    policies: tuple[str, ...]
    uncovered: tuple[Uncovered, ...]


def native_policies(
    policies: Iterable[GPUPolicy], own_namespace: str = NAMESPACE, excluded: Sequence[str] = EXCLUDED
) -> NativePolicies:
    """The ValidatingAdmissionPolicies and bindings of `policies`' rules; `own_namespace` (the
    webhook's) and `excluded` are left alone, as the webhook configurations leave them."""
    objects: list[dict[str, object]] = []
    names: list[str] = []
    uncovered: list[Uncovered] = []
    left_alone = [*excluded, own_namespace]
    for policy in policies:
        uncovered.extend(_uncovered(policy))
        if policy.namespace is not None or not policy.rules:
            continue
        names.append(policy.name)
        for action in (Action.DENY, Action.WARN, Action.AUDIT):
            validations = _validations(policy, action)
            if validations:
                name = _object_name(policy.name) + _SUFFIX[action]
                objects.append(_policy(policy, name, validations, left_alone))
                objects.append(_binding(policy, name, action))
    return NativePolicies(tuple(objects), tuple(names), tuple(uncovered))


def _uncovered(policy: GPUPolicy) -> list[Uncovered]:
    if policy.namespace is not None:
        return [Uncovered(policy.name, "the whole policy", "a team's namespaced policy is not generated")]
    parts = [
        ("mig", policy.mig is not None, "the MIG rewrite reads the cluster's GPUs"),
        ("runtime", policy.runtime is not None, "runtime settings are written by the mutating webhook"),
        ("triton", policy.triton is not None, "the sidecar is written by the mutating webhook"),
        ("quota", policy.quota is not None, "budgets count the cluster's pods"),
        ("security", True, "device-access checks read env values, claims and device classes"),
        ("rules on UPDATE and ephemeral containers", bool(policy.rules), "ratcheted against the pod as it was"),
    ]
    return [Uncovered(policy.name, part, why) for part, present, why in parts if present]


def _object_name(policy: str) -> str:
    """`gpu-admission.<policy>`, or, where the policy's name is no DNS subdomain, a form of it
    that is, made unique by a hash of the name."""
    if len(policy) <= _NAME_ROOM and _DNS_SUBDOMAIN.match(policy):
        return f"gpu-admission.{policy}"
    slug = re.sub(r"[^a-z0-9]+", "-", policy.lower()).strip("-")[:_NAME_ROOM] or "policy"
    digest = hashlib.sha256(policy.encode()).hexdigest()[:8]
    return f"gpu-admission.{slug}-{digest}"


def _where(rule: Rule, policy: GPUPolicy, index: int) -> str:
    """What follows a rule's message: the policy, then the rule and its field, on one line (the
    API server refuses a message with line breaks)."""
    named = _WHITESPACE.sub(" ", f"(policy {policy.name})")
    return f" {named} [rule {rule.name}, spec.rules[{index}].expression]"


def _cel_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _validations(policy: GPUPolicy, action: Action) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for index, rule in enumerate(policy.rules):
        where = _where(rule, policy, index)
        if rule.action is action:
            message = _WHITESPACE.sub(" ", rule.message).strip() + where
            validation: dict[str, object] = {"expression": rule.expression.source, "message": message}
            if rule.message_expression is not None:
                validation["messageExpression"] = f"string({rule.message_expression.source}) + {_cel_string(where)}"
            found.append(validation)
        elif action is Action.DENY:  # the guard: denies where the rule cannot be evaluated
            source = rule.expression.source
            found.append(
                {
                    "expression": f"({source}) || !({source})",
                    "message": f"rule could not be evaluated, denied to be safe{where}",
                }
            )
    return found


def glob_regex(pattern: str) -> str:
    """A match.namespaces glob (fnmatch's `*`, `?`, `[...]`, `[!...]`) as an anchored RE2
    expression, for the names a namespace can have (a DNS label): a set becomes the explicit
    class of the label characters fnmatch lets it match, so the two never read a set differently."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        i += 1
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            start = i + 1 if pattern[i : i + 1] == "!" else i
            start += 1 if pattern[start : start + 1] == "]" else 0  # a leading ] is one of the set
            end = pattern.find("]", start)
            if end < 0:  # no closing bracket: a literal [
                out.append(re.escape(char))
                continue
            members = "".join(c for c in _LABEL_CHARACTERS if fnmatchcase(c, pattern[i - 1 : end + 1]))
            out.append(f"[{re.escape(members)}]" if members else _NOTHING)
            i = end + 1
        else:
            out.append(re.escape(char))
    return "^" + "".join(out) + "$"


def _namespaces_condition(patterns: Sequence[str]) -> str:
    exact = [p for p in patterns if not any(c in p for c in "*?[")]
    globs = [p for p in patterns if p not in exact]
    parts = []
    if exact:
        parts.append("request.namespace in [" + ", ".join(_cel_string(p) for p in exact) + "]")
    parts.extend(f"request.namespace.matches({_cel_string(glob_regex(p))})" for p in globs)
    return " || ".join(parts)


def _policy(
    policy: GPUPolicy, name: str, validations: list[dict[str, object]], left_alone: Sequence[str]
) -> dict[str, object]:
    # One condition, its parts joined by && in the engine's order: the API server evaluates every
    # matchCondition of a policy, where && stops at the first false. So a pod outside the
    # namespaces costs one comparison, and the policy's own condition is evaluated only for pods
    # the engine would evaluate it for: an error there (which denies) never reaches other pods.
    parts = [_namespaces_condition(policy.match.namespaces)] if policy.match.namespaces else []
    parts += ["\n".join(pod_condition("object", asks=ANY_EXTENDED)), "\n".join(MIRROR_PODS)]
    if policy.match.condition is not None:
        parts.append(policy.match.condition.source)
    conditions = [{"name": "the-policy-matches", "expression": " &&\n".join(f"({part})" for part in parts)}]
    spec: dict[str, object] = {
        "failurePolicy": "Fail",  # an error denies, as the engine fails closed
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
            ],
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(left_alone)}
                ]
            },
        },
        "matchConditions": conditions,
    }
    if policy.variables:
        spec["variables"] = [{"name": n, "expression": e.source} for n, e in policy.variables]
    spec["validations"] = validations
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": _metadata(policy, name),
        "spec": spec,
    }


def _selector(selector: LabelSelector) -> dict[str, object]:
    expressions = []
    for requirement in selector.requirements:
        expression: dict[str, object] = {"key": requirement.key, "operator": requirement.operator.value}
        if requirement.operator in (Operator.IN, Operator.NOT_IN):
            expression["values"] = sorted(requirement.values)
        expressions.append(expression)
    return {"matchExpressions": expressions}


def _binding(policy: GPUPolicy, name: str, action: Action) -> dict[str, object]:
    spec: dict[str, object] = {"policyName": name, "validationActions": [_BINDING_ACTIONS[action]]}
    resources: dict[str, object] = {}
    if policy.match.pod_selector is not None:
        resources["objectSelector"] = _selector(policy.match.pod_selector)
    if policy.match.namespace_selector is not None:
        resources["namespaceSelector"] = _selector(policy.match.namespace_selector)
    if resources:
        spec["matchResources"] = resources
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": _metadata(policy, name),
        "spec": spec,
    }


def _metadata(policy: GPUPolicy, name: str) -> dict[str, object]:
    return {
        "name": name,
        "labels": dict(MANAGED_BY),
        "annotations": {POLICY_ANNOTATION: policy.name, "gpu-admission.io/source": str(policy.source)},
    }
