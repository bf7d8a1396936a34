"""A cluster policy's match as CEL the API server evaluates: its namespaces, its selectors over the
pod's and the namespace's labels, and its condition, joined with && in the engine's order
(policies.model.policyset.PolicySet.matching).

The native rules put a policy's own selectors in its binding's matchResources; a policy whose
verdict depends on which *other* policies match (the first with a `mig` section owns the pod's
MIG settings) needs theirs in CEL, as a condition of its own: `matches` gives it.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from fnmatch import fnmatchcase

from policies.model.policy import GPUPolicy
from policies.model.selectors import LabelSelector, Operator

POD = "object.metadata"
NAMESPACE_OBJECT = "namespaceObject.metadata"  # the API server always labels it with its name
_LABEL_CHARACTERS = string.ascii_lowercase + string.digits + "-"  # all a namespace's name may hold
_NOTHING = "[^\\s\\S]"  # a set no character is in (RE2 has no lookahead)


def cel_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


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


def namespaces_condition(patterns: Sequence[str]) -> str:
    """The request's namespace is one of `patterns` (names and globs)."""
    exact = [p for p in patterns if not any(c in p for c in "*?[")]
    globs = [p for p in patterns if p not in exact]
    parts = []
    if exact:
        parts.append("request.namespace in [" + ", ".join(cel_string(p) for p in exact) + "]")
    parts.extend(f"request.namespace.matches({cel_string(glob_regex(p))})" for p in globs)
    return " || ".join(parts)


def selector_condition(selector: LabelSelector, metadata: str) -> str:
    """`selector` over the labels of the object whose metadata is at `metadata`, as
    Kubernetes reads a LabelSelector: NotIn and DoesNotExist hold where the label is absent."""
    labels = f"{metadata}.labels"
    parts = []
    for requirement in selector.requirements:
        has = f"has({labels}) && {cel_string(requirement.key)} in {labels}"
        if requirement.operator in (Operator.IN, Operator.NOT_IN):
            values = "[" + ", ".join(cel_string(v) for v in sorted(requirement.values)) + "]"
            has = f"{has} && {labels}[{cel_string(requirement.key)}] in {values}"
        holds = requirement.operator in (Operator.IN, Operator.EXISTS)
        parts.append(f"({has})" if holds else f"!({has})")
    return " && ".join(parts) or "true"


def matches(policy: GPUPolicy) -> str:
    """`policy` (a cluster policy) matches the pod under review: what the engine checks, in its
    order, so a condition is evaluated only where the engine evaluates it."""
    match = policy.match
    parts = [namespaces_condition(match.namespaces)] if match.namespaces else []
    if match.pod_selector is not None:
        parts.append(selector_condition(match.pod_selector, POD))
    if match.namespace_selector is not None:
        parts.append(selector_condition(match.namespace_selector, NAMESPACE_OBJECT))
    if match.condition is not None:
        parts.append(match.condition.source)
    return " && ".join(f"({part})" for part in parts) or "true"


def reachable(policies: Sequence[GPUPolicy]) -> list[GPUPolicy]:
    """`policies` (in precedence order) up to the first that matches every pod: none after it is
    ever the first to match."""
    for index, policy in enumerate(policies):
        if matches(policy) == "true":
            return list(policies[: index + 1])
    return list(policies)
