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

With them, each policy's MIG gate (policies.native.mig_gate), made from the whole set. What
stays with the webhook is listed per policy (`Uncovered`): the MIG rewrite, runtime settings,
Triton, quotas and device-access checks, and rules on UPDATE and on ephemeral containers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from policies.gpu.catalog import CATALOG, Catalog
from policies.model.policy import Action, GPUPolicy, Rule
from policies.model.policyset import precedence
from policies.native.device_access import device_access
from policies.native.matching import cel_string
from policies.native.mig_gate import mig_gates
from policies.native.objects import (
    AUDIT,
    POLICY_ANNOTATION,
    WARN,
    Uncovered,
    admission_policy,
    binding,
    object_name,
    one_line,
    repeated_names,
)
from policies.native.reach import EXCLUDED, NAMESPACE
from policies.native.runtime_map import runtime_settings

_PART = {Action.DENY: "", Action.WARN: WARN, Action.AUDIT: AUDIT}


class NameClash(ValueError):
    """Two policies' objects would have one name, so the API server would keep only one: said
    rather than generated (policies.native.objects.object_name makes this need a hash collision)."""


@dataclass(frozen=True, slots=True)
class NativePolicies:
    """The objects to apply (each policy, then its binding), the GPUPolicies they come from,
    what they leave to the webhook, and whether the default device-access checks are among them."""

    objects: tuple[dict[str, object], ...]
    policies: tuple[str, ...]
    uncovered: tuple[Uncovered, ...]
    defaults: bool = False
    runtime: bool = False  # the set's runtime settings, as one MutatingAdmissionPolicy

    def only(self, names: Collection[str]) -> NativePolicies:
        """What comes of the policies named `names`, generated with the others (which a MIG gate
        reads), then chosen."""
        chosen = tuple(
            o for o in self.objects if _metadata_of(o).get("annotations", {}).get(POLICY_ANNOTATION) in names
        )
        return NativePolicies(
            chosen,
            tuple(name for name in self.policies if name in names),
            tuple(u for u in self.uncovered if u.policy in names),
        )


def _metadata_of(obj: dict[str, object]) -> dict[str, dict[str, str]]:
    metadata = obj["metadata"]
    assert isinstance(metadata, dict)  # objects are built here: narrows the type for mypy
    return metadata


def native_policies(
    policies: Iterable[GPUPolicy],
    own_namespace: str = NAMESPACE,
    excluded: Sequence[str] = EXCLUDED,
    catalog: Catalog = CATALOG,
    mutating: bool = True,
) -> NativePolicies:
    """The ValidatingAdmissionPolicies and bindings of `policies`' rules, MIG gates and device
    checks, and (`mutating`: Kubernetes 1.36+) the MutatingAdmissionPolicy of their runtime
    settings, all of the whole set (a gate holds where no policy before it decides MIG; a
    runtime key is the first matching policy's); `own_namespace` (the webhook's) and `excluded`
    are left alone, as the webhook configurations leave them."""
    objects: list[dict[str, object]] = []
    names: list[str] = []
    uncovered: list[Uncovered] = []
    left_alone = [*excluded, own_namespace]
    ordered = sorted(policies, key=precedence)
    for policy in ordered:
        uncovered.extend(_uncovered(policy))
        if policy.namespace is not None or not policy.rules:
            continue
        names.append(policy.name)
        variables = [(n, e.source) for n, e in policy.variables]
        for action in (Action.DENY, Action.WARN, Action.AUDIT):
            validations = _validations(policy, action)
            if validations:
                name = object_name(policy.name, _PART[action])
                objects.append(admission_policy(policy, name, validations, left_alone, variables))
                objects.append(binding(policy, name, action))
    gates, gated, too_long = mig_gates(ordered, catalog, left_alone)
    checks, checked, defaults, too_long_checks = device_access(ordered, left_alone)
    written, runtime_owners, runtime_left = runtime_settings(ordered, left_alone) if mutating else ([], [], [])
    objects += [*gates, *checks, *written]
    uncovered += [*too_long, *too_long_checks, *runtime_left]
    made = tuple(dict.fromkeys([*names, *gated, *checked, *runtime_owners]))
    repeated = repeated_names(objects)
    if repeated:
        raise NameClash(f"two policies' objects would both be named {', '.join(repeated)}: rename one of them")
    return NativePolicies(tuple(objects), made, tuple(uncovered), defaults, bool(written))


def _uncovered(policy: GPUPolicy) -> list[Uncovered]:
    if policy.namespace is not None:
        return [Uncovered(policy.name, "the whole policy", "a team's namespaced policy is not generated")]
    parts = [
        ("mig", policy.mig is not None, "the rewrite reads the cluster's GPUs; named profiles are native"),
        (
            "runtime",
            policy.runtime is not None,
            "settings for pods the native object leaves (no nvidia.com/gpu or MIG request, Triton, past its "
            "bounds, a second pass) and a team's are written by the mutating webhook",
        ),
        ("triton", policy.triton is not None, "the sidecar is written by the mutating webhook"),
        ("quota", policy.quota is not None, "budgets count the cluster's pods"),
        ("security", True, "checks that read ConfigMaps, claims and device classes; a team's tightening"),
        ("rules on UPDATE and ephemeral containers", bool(policy.rules), "ratcheted against the pod as it was"),
    ]
    return [Uncovered(policy.name, part, why) for part, present, why in parts if present]


def _where(rule: Rule, policy: GPUPolicy, index: int) -> str:
    """What follows a rule's message: the policy, then the rule and its field, on one line (the
    API server refuses a message with line breaks)."""
    named = one_line(f"(policy {policy.name})")
    return f" {named} [rule {rule.name}, spec.rules[{index}].expression]"


def _validations(policy: GPUPolicy, action: Action) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for index, rule in enumerate(policy.rules):
        where = _where(rule, policy, index)
        if rule.action is action:
            message = one_line(rule.message) + where
            validation: dict[str, object] = {"expression": rule.expression.source, "message": message}
            if rule.message_expression is not None:
                validation["messageExpression"] = f"string({rule.message_expression.source}) + {cel_string(where)}"
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
