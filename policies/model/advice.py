"""What `lint` says about policies that load but will not do what their authors meant.

None of this stops a policy from loading (the webhook enforces what it is given); `lint` reports
it with file, line, policy and field path, and exits 1:

- a map indexed by a literal key without a guard (`labels['team']` with no `'team' in labels`
  nor `has(labels.team)`): on a pod without the key the expression fails, and a failing rule
  denies (fails closed), so pods are denied "with an evaluation error" for a missing label;
- a rule that can never be true, or never false, on a pod: it names no variable at all, or
  compares what every pod has the same (`object.kind` is always `Pod`, pod templates included;
  `object.apiVersion` is `v1`; `size()` is never negative);
- two policies that may decide the same pod with different default profiles: the one that
  decides is told, so the author sees which profile pods actually get.

A profile no allowed model has is a load problem already (spec.mig.*, spec.triton.profile,
quota slices): the catalog is checked when the policy is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from functools import lru_cache
from itertools import combinations

from policies.errors import PolicyProblem
from policies.model.cel_fields import tokens
from policies.model.policy import GPUPolicy, Match

# Variables an expression may read; one naming none of them is a constant.
_VARIABLES = frozenset({"object", "oldObject", "request", "namespaceObject", "variables", "params", "authorizer"})
# What every object a rule sees has, whatever the requester wrote (the engine judges Pods and
# builds a Pod of each pod template).
_FIXED = {("object", "kind"): "Pod", ("object", "apiVersion"): "v1"}


_PAIRS = frozenset({"==", "!=", ">=", "<=", "&&", "||"})


def _tokens(source: str) -> list[str] | None:
    """Tokens with literals kept and two-character operators whole (the tokenizer splits them)."""
    found = tokens(source, keep_literals=True)
    if found is None:
        return None
    merged: list[str] = []
    for token in found:
        if merged and merged[-1] + token in _PAIRS:
            merged[-1] += token
        else:
            merged.append(token)
    return merged


def _literal(token: str) -> str | None:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"" and not token.startswith(("'''", '"""')):
        return token[1:-1]
    return None


def _path_before(found: list[str], end: int) -> tuple[str, int]:
    """The dotted selection ending at found[end] (`object.metadata.labels`) and where it starts."""
    start = end
    while start >= 2 and found[start - 1] == "." and found[start - 2].isidentifier():
        start -= 2
    return "".join(found[start : end + 1]), start


def expression_advice(source: str, verdict: bool) -> list[str]:
    """What lint says of one expression (tokenized once); `verdict`: its value decides (a rule or
    a condition), so a constant one is worth saying."""
    return list(_expression_advice(source, verdict))


@lru_cache(maxsize=4096)
def _expression_advice(source: str, verdict: bool) -> tuple[str, ...]:
    """expression_advice, once per text: policies made from one template repeat their expressions."""
    found = _tokens(source)
    if found is None:
        return ()
    said = [
        f"{index} fails on objects without that key, and a failing rule denies; guard it with `in` or has()"
        for index in _unguarded(found)
    ]
    constant = _constant(found) if verdict else None
    if constant is not None:
        said.append(f"the same on every pod: {constant}")
    return tuple(said)


def unguarded_indexes(source: str) -> list[str]:
    """`x.y['k']` selections with no `'k' in x.y` and no `has(x.y.k)` anywhere in the expression."""
    found = _tokens(source)
    return [] if found is None else _unguarded(found)


def _unguarded(found: list[str]) -> list[str]:
    text = "".join(found)
    unguarded: list[str] = []
    for i in range(1, len(found) - 2):
        key = _literal(found[i + 1])
        if found[i] != "[" or key is None or found[i + 2] != "]" or not found[i - 1].isidentifier():
            continue
        target, _ = _path_before(found, i - 1)
        guards = (f"{found[i + 1]}in{target}", f"'{key}'in{target}", f'"{key}"in{target}', f"has({target}.{key})")
        if not any(guard in text for guard in guards):
            unguarded.append(f"{target}[{found[i + 1]}]")
    return unguarded


def constant_outcome(source: str) -> str | None:
    """Why the expression has the same value on every pod, if it plainly does."""
    found = _tokens(source)
    return None if found is None else _constant(found)


def _constant(found: list[str]) -> str | None:
    if not any(token in _VARIABLES for token in found):
        return "it names no variable"
    for i, token in enumerate(found):
        if token in ("==", "!=") and 0 < i < len(found) - 1:
            for side, other in ((i - 1, i + 1), (i + 1, i - 1)):
                fixed = _fixed_value(found, side, before=side < i)
                value = _literal(found[other])
                if fixed is not None and value is not None and value != fixed[1]:
                    never = "true" if token == "==" else "false"
                    return f"{fixed[0]} is always {fixed[1]!r}, so {fixed[0]} {token} {value!r} is never {never}"
        if token == "size" and found[i + 1 : i + 5] in (["(", ")", "<", "0"], ["(", ")", ">=", "0"]):
            return f"size() {found[i + 3]} 0 is always {'false' if found[i + 3] == '<' else 'true'}"
    return None


def _fixed_value(found: list[str], at: int, before: bool) -> tuple[str, str] | None:
    """The fixed field selected next to an operator: `object.kind ==` (before) or `== object.kind`."""
    if before:
        path, start = _path_before(found, at)
        parts = tuple(path.split("."))
        if start > 0 and found[start - 1] == ".":
            return None
    else:
        parts = tuple(found[at : at + 3 : 2]) if found[at + 1 : at + 2] == ["."] else ()
        if at + 3 < len(found) and found[at + 3] in (".", "[", "("):
            return None
    value = _FIXED.get(parts) if len(parts) == 2 else None
    return (".".join(parts), value) if value is not None else None


def _namespaces_meet(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    if not a or not b:
        return True

    def meet(x: str, y: str) -> bool:
        if fnmatchcase(x, y) or fnmatchcase(y, x):
            return True
        wild = "*?["
        if any(c in x for c in wild) and any(c in y for c in wild):
            px, py = (s[: min((s.find(c) for c in wild if c in s), default=len(s))] for s in (x, y))
            return px.startswith(py) or py.startswith(px)
        return False

    return any(meet(x, y) for x in a for y in b)


def _may_meet(a: Match, b: Match, namespace_a: str | None, namespace_b: str | None) -> bool:
    """Whether some pod is surely matched by both, were it in the right namespace with the right
    labels: selectors on one side only never keep policies apart; different ones on both sides, or
    a match condition, are taken to (lint cannot see the cluster's labels)."""
    if namespace_a and namespace_b and namespace_a != namespace_b:
        return False
    if a.condition is not None or b.condition is not None:
        return False
    for x, y in ((a.pod_selector, b.pod_selector), (a.namespace_selector, b.namespace_selector)):
        if x is not None and y is not None and x != y:
            return False
    return _namespaces_meet(a.namespaces, b.namespaces)


def _precedence(policy: GPUPolicy) -> tuple[bool, int, str]:
    return (policy.namespace is not None, -policy.priority, policy.name)


def overlapping_profiles(
    policies: Iterable[GPUPolicy], accepted: frozenset[frozenset[str]] = frozenset()
) -> list[PolicyProblem]:
    """Pairs of policies that may decide the same pod with different default profiles, but for
    the pairs whose overlap was `accepted` (by name) as intended."""
    with_defaults = [p for p in policies if p.mig is not None and p.mig.default_profile]
    advice: list[PolicyProblem] = []
    for a, b in combinations(sorted(with_defaults, key=_precedence), 2):
        assert a.mig is not None and b.mig is not None
        if a.mig.default_profile == b.mig.default_profile or not _may_meet(a.match, b.match, a.namespace, b.namespace):
            continue
        if frozenset((a.name, b.name)) in accepted:
            continue
        why = "a higher priority" if a.priority != b.priority else "precedence (same priority: by name)"
        message = (
            f"{a.mig.default_profile} here, {b.mig.default_profile} in policy {b.name} ({b.source}), which "
            f"may match the same pods; this one decides them by {why}: narrow one of them "
            "(match.namespaces, a selector) or give them the same profile"
        )
        advice.append(PolicyProblem(a.source.file, a.source.line, a.name, "spec.mig.defaultProfile", message))
    return advice
