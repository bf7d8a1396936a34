"""The Kubernetes objects native policies are made of: a ValidatingAdmissionPolicy scoped as the
webhook is, its binding, and their names and labels. What goes in them is the generators'
(validating.py: rules; mig_gate.py: the MIG resources a container may name).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from policies.model.policy import Action, GPUPolicy
from policies.model.selectors import LabelSelector, Operator
from policies.native.matching import namespaces_condition
from policies.native.reach import ANY_EXTENDED, MIRROR_PODS, pod_condition

API_VERSION = "admissionregistration.k8s.io/v1"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-admission", "gpu-admission.io/native": "true"}
POLICY_ANNOTATION = "gpu-admission.io/policy"
BINDING_ACTIONS = {Action.DENY: "Deny", Action.WARN: "Warn", Action.AUDIT: "Audit"}
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_ROOM = 200  # of 253: room for the prefix and a suffix
# What a policy's objects add to `gpu-admission.<policy>`: its warn and audit rules, its MIG gate,
# its device checks. None is the end of another (so no two parts of one policy share a name), and a
# policy whose own name ends in one is named by its hash: else policy `x.mig`'s rules and policy
# `x`'s gate would be one object, and applying both would leave one policy's checks unmade.
WARN, AUDIT, MIG, SECURITY = ".warn", ".audit", ".mig", ".security"
PARTS = (WARN, AUDIT, MIG, SECURITY)
_WHITESPACE = re.compile(r"\s+")
# The API server refuses a CEL expression of more than 100,000 code points (CEL's parser limit,
# which it sets) or 256 KiB (the field's): a policy whose condition says which policies come
# before it grows with them, and past these it is left to the webhook.
CODE_POINT_LIMIT = 100_000
BYTE_LIMIT = 256 * 1024
TOO_LONG = "the condition saying so would pass what the API server takes in one CEL expression"


@dataclass(frozen=True, slots=True)
class Uncovered:
    """A part of a policy the native policies leave to the webhook, and why."""

    policy: str
    part: str
    why: str

    def __str__(self) -> str:
        return f"policy {self.policy}: {self.part}: left to the webhook ({self.why})"


def _expressions(spec: dict[str, object]) -> Iterator[str]:
    for key in ("matchConditions", "variables", "validations", "mutations"):
        items = spec.get(key)
        for item in items if isinstance(items, list) else ():
            patch = item.get("jsonPatch") if isinstance(item, dict) else None
            for field in ("expression", "messageExpression"):
                for holder in (item, patch):
                    text = holder.get(field) if isinstance(holder, dict) else None
                    if isinstance(text, str):
                        yield text


def too_long(admission_policy: dict[str, object]) -> bool:
    """Whether the API server would refuse one of the policy's expressions as too long."""
    spec = admission_policy["spec"]
    texts = _expressions(spec) if isinstance(spec, dict) else iter(())
    return any(len(e) > CODE_POINT_LIMIT or len(e.encode()) > BYTE_LIMIT for e in texts)


def nonzero(amount: str) -> str:
    """CEL: the quantity `amount` is not zero. compareTo, not sign(): the API server's quantity
    library has no q.sign() (its sign is a global function, sign(q))."""
    return f"quantity({amount}).compareTo(quantity('0')) != 0"


def held(container: str, name: str, amount: str = "", value: str = "") -> str:
    """CEL for each resource `r` the container holds whose name `name` accepts and, where given,
    whose amount `amount` accepts (`{}` for the amount), as `value` of its amount (`r` itself
    where none is given): its limits', then those only its requests name (limits win, as the
    engine reads a container). The name is read first: a container's CPU and memory are never
    parsed."""

    def listed(section: str, only: str) -> str:
        where = f"{container}.resources.{section}"
        kept = " && ".join(part for part in (name, only, amount.format(f"{where}[r]")) if part)
        mapped = f".map(r, {value.format(f'{where}[r]')})" if value else ""
        return f"(has({where}) ? {where}.filter(r, {kept}){mapped} : [])"

    limits = f"{container}.resources.limits"
    only_requested = listed("requests", f"!(has({limits}) && r in {limits})")
    return f"(!has({container}.resources) ? [] : {listed('limits', '')} + {only_requested})"


def one_line(text: str) -> str:
    """`text` with each run of white space one space: the API server refuses a message with line
    breaks."""
    return _WHITESPACE.sub(" ", text).strip()


def object_name(policy: str, part: str = "") -> str:
    """`gpu-admission.<policy><part>` (`part`: "" for its deny rules, or one of PARTS), or, where
    the policy's name is no DNS subdomain, too long or ends in a part, a form of it that is none
    of these, made unique by a hash of the name (which ends in a hex digit, no part's last)."""
    assert part == "" or part in PARTS, part
    if len(policy) <= _NAME_ROOM and _DNS_SUBDOMAIN.match(policy) and not policy.endswith(PARTS):
        return f"gpu-admission.{policy}{part}"
    slug = re.sub(r"[^a-z0-9]+", "-", policy.lower()).strip("-")[:_NAME_ROOM] or "policy"
    digest = hashlib.sha256(policy.encode()).hexdigest()[:8]
    return f"gpu-admission.{slug}-{digest}{part}"


def repeated_names(objects: Sequence[dict[str, object]]) -> list[str]:
    """Names two objects of one kind share (none, unless two policies' names hash alike or one is
    named as another's hash): the API server would keep one of them."""
    seen: set[tuple[object, object]] = set()
    repeated: list[str] = []
    for obj in objects:
        metadata = obj["metadata"]
        assert isinstance(metadata, dict)  # objects are built here: narrows the type for mypy
        key = (obj["kind"], metadata["name"])
        if key in seen:
            repeated.append(str(key[1]))
        seen.add(key)
    return repeated


def admission_policy(
    policy: GPUPolicy,
    name: str,
    validations: list[dict[str, object]],
    left_alone: Sequence[str],
    variables: Sequence[tuple[str, str]] = (),
    unless: Sequence[str] = (),
) -> dict[str, object]:
    """A ValidatingAdmissionPolicy of `validations` for pod CREATE, scoped as the webhook is, then
    by `policy`'s namespaces and condition (its selectors are its binding's), and not where any
    of `unless` holds; `variables`: (name, CEL) pairs."""
    # The policy's namespaces first, its condition after the scope: a pod outside the namespaces
    # costs one comparison, and the condition is evaluated only for pods the engine would
    # evaluate it for (an error there, which denies, never reaches other pods).
    before = [namespaces_condition(policy.match.namespaces)] if policy.match.namespaces else []
    after = [policy.match.condition.source] if policy.match.condition is not None else []
    after += [f"!({other})" for other in unless]
    return scoped_policy(metadata(policy, name), before, after, validations, left_alone, variables)


def scoped_policy(
    meta: dict[str, object],
    before: Sequence[str],
    after: Sequence[str],
    validations: list[dict[str, object]],
    left_alone: Sequence[str],
    variables: Sequence[tuple[str, str]] = (),
) -> dict[str, object]:
    """A ValidatingAdmissionPolicy of `validations` for pod CREATE, scoped as the webhook is, with
    the conditions `before` and `after` the scope: one matchCondition, its parts joined by && (the
    API server evaluates every matchCondition of a policy, where && stops at the first false)."""
    parts = [*before, "\n".join(pod_condition("object", asks=ANY_EXTENDED)), "\n".join(MIRROR_PODS), *after]
    conditions = [{"name": "the-policy-matches", "expression": " &&\n".join(f"({part})" for part in parts)}]
    spec: dict[str, object] = {
        "failurePolicy": "Fail",  # an error denies, as the engine fails closed
        "matchConstraints": _pod_creates(left_alone),
        "matchConditions": conditions,
    }
    if variables:
        spec["variables"] = [{"name": n, "expression": e} for n, e in variables]
    spec["validations"] = validations
    return {"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicy", "metadata": meta, "spec": spec}


def _pod_creates(left_alone: Sequence[str]) -> dict[str, object]:
    """matchConstraints: pod CREATE outside the namespaces left alone, as the webhook is sent pods."""
    return {
        "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(left_alone)}
            ]
        },
    }


def mutating_policy(
    meta: dict[str, object],
    condition: str,
    variables: Sequence[tuple[str, str]],
    expression: str,
    left_alone: Sequence[str],
) -> dict[str, object]:
    """A MutatingAdmissionPolicy for pod CREATE where `condition` holds, writing the JSON patch
    `expression` makes. An error leaves the pod to the webhook (failurePolicy Ignore): what it
    writes, the webhook writes too where it has not."""
    spec: dict[str, object] = {
        "failurePolicy": "Ignore",
        "reinvocationPolicy": "Never",
        "matchConstraints": _pod_creates(left_alone),
        "matchConditions": [{"name": "the-policy-applies", "expression": condition}],
        "variables": [{"name": n, "expression": e} for n, e in variables],
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}],
    }
    return {"apiVersion": API_VERSION, "kind": "MutatingAdmissionPolicy", "metadata": meta, "spec": spec}


def mutating_binding(name: str, meta: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": meta,
        "spec": {"policyName": name},
    }


def _selector(selector: LabelSelector) -> dict[str, object]:
    expressions = []
    for requirement in selector.requirements:
        expression: dict[str, object] = {"key": requirement.key, "operator": requirement.operator.value}
        if requirement.operator in (Operator.IN, Operator.NOT_IN):
            expression["values"] = sorted(requirement.values)
        expressions.append(expression)
    return {"matchExpressions": expressions}


def binding(
    policy: GPUPolicy | None, name: str, action: Action, meta: dict[str, object] | None = None
) -> dict[str, object]:
    """The binding of policy `name` with `action`, its matchResources `policy`'s selectors (none
    where no one policy owns it: then `meta`)."""
    spec: dict[str, object] = {"policyName": name, "validationActions": [BINDING_ACTIONS[action]]}
    resources: dict[str, object] = {}
    if policy is not None and policy.match.pod_selector is not None:
        resources["objectSelector"] = _selector(policy.match.pod_selector)
    if policy is not None and policy.match.namespace_selector is not None:
        resources["namespaceSelector"] = _selector(policy.match.namespace_selector)
    if resources:
        spec["matchResources"] = resources
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": meta if policy is None else metadata(policy, name),
        "spec": spec,
    }


def metadata(policy: GPUPolicy | None, name: str) -> dict[str, object]:
    """Name, labels and the policy it comes from (none: what no one policy owns, such as the
    default device-access checks)."""
    annotations = {POLICY_ANNOTATION: policy.name, "gpu-admission.io/source": str(policy.source)} if policy else {}
    return {"name": name, "labels": dict(MANAGED_BY), "annotations": annotations}
