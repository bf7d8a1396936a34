"""A compiled, indexed, immutable set of policies: the unit that is swapped atomically.

Namespace names and globs are indexed at load, so a request only looks at the policies whose
namespace criterion can hold: exact names by dict, globs by their literal prefix; those are indexed
again by a pod label each cannot match without (policies.model.candidates).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TypeVar

from policies.gpu.catalog import CATALOG, Catalog
from policies.memo import Memo
from policies.model.candidates import Candidates
from policies.model.cel import CelEvaluationError, CelInput
from policies.model.policy import GPUPolicy
from policies.model.workload_kinds import BUILT_IN_TABLE
from policies.model.workloads import WorkloadTable

_GLOB_CHARS = "*?["
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
T = TypeVar("T")


def precedence(policy: GPUPolicy) -> tuple[bool, int, str]:
    """The order policies take effect in (the first with a section decides it): cluster policies
    before namespaced ones, then by priority, highest first, then by name."""
    return (policy.namespace is not None, -policy.priority, policy.name)


@dataclass(frozen=True, slots=True)
class MatchResult:
    policies: tuple[GPUPolicy, ...]
    errors: tuple[tuple[GPUPolicy, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Lapsed:
    """A policy out of force: its file has problems and no version of it ever loaded, here or
    (persisted by a replica before) in the cluster. It fails closed where it could hold: its
    namespace's pods (a team's policy), or every pod (a cluster policy: what it matches cannot
    be read from a file that does not load)."""

    policy: str  # the name its problems give, else its file
    file: str
    namespace: str | None
    why: str


def _prefix(pattern: str) -> str:
    cut = min((pattern.index(c) for c in _GLOB_CHARS if c in pattern), default=len(pattern))
    return pattern[:cut]


@dataclass(frozen=True, slots=True)
class PolicySet:
    policies: tuple[GPUPolicy, ...] = ()
    generation: int = 0
    catalog: Catalog = CATALOG
    workloads: WorkloadTable = BUILT_IN_TABLE  # where pod templates live, by kind
    lapsed: tuple[Lapsed, ...] = ()  # policies out of force, failing closed
    _rank: dict[str, int] = field(init=False, repr=False, compare=False)
    _exact: dict[str, tuple[GPUPolicy, ...]] = field(init=False, repr=False, compare=False)
    _globs: dict[str, tuple[tuple[str, GPUPolicy], ...]] = field(init=False, repr=False, compare=False)
    _everywhere: tuple[GPUPolicy, ...] = field(init=False, repr=False, compare=False)
    _max_prefix: int = field(init=False, repr=False, compare=False)
    _memo: Memo = field(init=False, repr=False, compare=False)

    def lapsed_in(self, namespace: str) -> tuple[Lapsed, ...]:
        return tuple(lapsed for lapsed in self.lapsed if lapsed.namespace in (None, namespace))

    def __post_init__(self) -> None:
        # Cluster policies first: a namespaced one decides MIG, runtime and Triton only where none does.
        ordered = sorted(self.policies, key=precedence)
        exact: dict[str, list[GPUPolicy]] = {}
        globs: dict[str, list[tuple[str, GPUPolicy]]] = {}
        everywhere: list[GPUPolicy] = []
        for policy in ordered:
            patterns = policy.match.namespaces
            if not patterns:
                everywhere.append(policy)
            for pattern in dict.fromkeys(patterns):
                if any(c in pattern for c in _GLOB_CHARS):
                    globs.setdefault(_prefix(pattern), []).append((pattern, policy))
                else:
                    exact.setdefault(pattern, []).append(policy)
        object.__setattr__(self, "policies", tuple(ordered))
        object.__setattr__(self, "_rank", {p.name: i for i, p in enumerate(ordered)})
        object.__setattr__(self, "_exact", {k: tuple(v) for k, v in exact.items()})
        object.__setattr__(self, "_globs", {k: tuple(v) for k, v in globs.items()})
        object.__setattr__(self, "_everywhere", tuple(everywhere))
        object.__setattr__(self, "_max_prefix", max(map(len, globs), default=0))
        object.__setattr__(self, "_memo", Memo())

    def memo(self, kind: str, policies: tuple[GPUPolicy, ...], build: Callable[[tuple[GPUPolicy, ...]], T]) -> T:
        """What `build` derives from a combination of this set's policies, computed once per combination."""
        return self.cached((kind, tuple(p.name for p in policies)), lambda: build(policies))

    def cached(self, key: Hashable, build: Callable[[], T]) -> T:
        """`build()`, computed once per key for this set: the set is immutable, so a derived value
        never goes stale, and it goes with the set when swapped."""
        return self._memo.get(key, build)

    def by_name(self, name: str) -> GPUPolicy | None:
        rank = self._rank.get(name)
        return None if rank is None else self.policies[rank]

    def in_namespace(self, namespace: str, namespace_labels: Mapping[str, str] | None) -> tuple[GPUPolicy, ...]:
        """Policies whose namespace criteria (namespaces, namespaceSelector, a namespaced policy's
        own) admit `namespace`, whatever its pods: where a policy's budgets may exist."""
        candidates = self._namespace_candidates(namespace)
        return tuple(p for p in candidates if _namespace_selects(p, namespace, namespace_labels))

    def _namespace_candidates(self, namespace: str) -> tuple[GPUPolicy, ...]:
        return self._candidates(namespace).all

    def _candidates(self, namespace: str) -> Candidates:
        """The policies whose namespaces criterion admits `namespace`, indexed by pod label."""
        return self.cached(("candidates", namespace), lambda: Candidates(self._scan_namespace(namespace)))

    def _scan_namespace(self, namespace: str) -> tuple[GPUPolicy, ...]:
        found: dict[str, GPUPolicy] = {p.name: p for p in self._exact.get(namespace, ())}
        for length in range(min(len(namespace), self._max_prefix) + 1):
            for pattern, policy in self._globs.get(namespace[:length], ()):
                if policy.name not in found and fnmatchcase(namespace, pattern):
                    found[policy.name] = policy
        for policy in self._everywhere:
            found[policy.name] = policy
        return tuple(sorted(found.values(), key=lambda p: self._rank[p.name]))

    def matching(
        self,
        namespace: str,
        labels: Mapping[str, str],
        cel_data: CelInput | None = None,
        namespace_labels: Mapping[str, str] | None = None,
        holding: frozenset[str] | None = None,
        obj: object = None,
    ) -> MatchResult:
        """Policies that match, in precedence order (cluster before namespaced, priority, name).

        `namespace_labels`: the namespace's labels, for namespaceSelector; known or not, the
        `kubernetes.io/metadata.name` label the API server gives every namespace is there.
        A condition that fails to evaluate is reported, not silently treated as a non-match.
        `holding`: instead of evaluating conditions, the sources of those known to hold (a pod
        already counted, whose object is no longer kept). `obj`: the object as `cel_data` has it,
        so conditions over its fields are looked up, not evaluated, where they cannot hold.
        """
        matched: list[GPUPolicy] = []
        errors: list[tuple[GPUPolicy, str]] = []
        for policy in self._candidates(namespace).for_pod(labels, holding is None, obj):
            selector = policy.match.pod_selector
            if selector is not None and not selector.matches(labels):
                continue
            if not _namespace_selects(policy, namespace, namespace_labels):
                continue
            condition = policy.match.condition
            if condition is not None:
                if holding is not None:
                    if condition.source not in holding:
                        continue
                elif cel_data is None:
                    continue
                else:
                    try:
                        if not condition.evaluate_bool(cel_data):
                            continue
                    except CelEvaluationError as error:
                        errors.append((policy, f"spec.match.condition: {error}"))
                        continue
            matched.append(policy)
        return MatchResult(tuple(matched), tuple(errors))


def _namespace_selects(policy: GPUPolicy, namespace: str, labels: Mapping[str, str] | None) -> bool:
    """The policy's namespaceSelector, over the namespace's labels; known or not, the
    `kubernetes.io/metadata.name` label the API server gives every namespace is there."""
    selector = policy.match.namespace_selector
    if selector is None:
        return True
    if labels is None or NAMESPACE_NAME_LABEL not in labels:
        labels = {**(labels or {}), NAMESPACE_NAME_LABEL: namespace}
    return selector.matches(labels)
