"""What an existing pod holds, kept apart from which budgets it is charged to.

A pod's usage, node and GPUs do not depend on the policies; which (policy, scope) budgets it is
charged to does. The server keeps per pod only what charging needs (PodFacts): its namespace,
the labels that quota policies' podSelectors name, and which of their CEL conditions hold for
it. A new policy set is then charged from the facts already kept, without listing the pods
again, as long as it needs nothing more (Needs.covers); one that selects on another label or
adds a condition needs the pods once more.

Facts of pods made from one template are equal; the server interns them, so 100,000 pods of a
few dozen shapes cost a reference each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from policies.gpu.catalog import CATALOG
from policies.judge.claim_usage import SharedClaims, claims_charge, with_claims
from policies.judge.quota import scope_of
from policies.judge.usage import Usage, counts_against_quota, gpus_held, pod_usage
from policies.model.cel import CelEvaluationError, CelInput, CompiledExpression
from policies.model.policyset import PolicySet
from policies.review.cluster import NO_CLUSTER, ClusterState
from policies.review.document import JSON
from policies.review.pod import FRACTION_ANNOTATION, SHARED_MEMORY_ANNOTATION, PodView, parse_pod
from policies.review.request import RequestInfo

Charges = tuple[tuple[str, str], ...]  # (policy, scope) budgets a pod is charged to


@dataclass(frozen=True, slots=True)
class Needs:
    """What charging pods under a policy set reads of them beyond their usage."""

    label_keys: frozenset[str] = frozenset()
    conditions: Mapping[str, CompiledExpression] = field(default_factory=dict)  # by source text

    def covers(self, other: Needs) -> bool:
        """Whether facts kept for these needs can be charged under `other`'s policies."""
        return other.label_keys <= self.label_keys and other.conditions.keys() <= self.conditions.keys()


def needs_of(policy_set: PolicySet) -> Needs:
    """The pod labels and CEL conditions the set's quota policies match on."""
    return policy_set.cached("pod facts needs", lambda: _needs_of(policy_set))


def _needs_of(policy_set: PolicySet) -> Needs:
    keys: set[str] = set()
    conditions: dict[str, CompiledExpression] = {}
    for policy in policy_set.policies:
        if policy.quota is None:
            continue
        if policy.match.pod_selector is not None:
            keys.update(requirement.key for requirement in policy.match.pod_selector.requirements)
        if policy.match.condition is not None:
            conditions[policy.match.condition.source] = policy.match.condition
    return Needs(frozenset(keys), conditions)


@dataclass(frozen=True, slots=True, eq=False)
class PodFacts:
    """One pod as charging sees it: compared by identity once interned (see `shape`)."""

    namespace: str
    labels: tuple[tuple[str, str], ...]  # only the keys the needs name, sorted
    holding: frozenset[str]  # sources of the needed conditions that hold for the pod
    usage: Usage
    node: str | None
    gpus: tuple[tuple[str, int], ...]  # GPU resource -> amount the scheduler reserves
    # The ResourceClaims it names, apart from `usage`: a budget charges each once, however many
    # of its pods name it (a claim it names that is not there: nothing, until it is made again).
    shared: SharedClaims = ()

    @property
    def total(self) -> Usage:
        """All the pod can get, its named claims included."""
        total = self.usage
        for _, usage in self.shared:
            total = total + usage
        return total

    @property
    def shape(self) -> tuple[object, ...]:
        """Equal for pods that charging cannot tell apart: the key facts are interned by."""
        shared = tuple((key, _usage_shape(usage)) for key, usage in self.shared)
        return (self.namespace, self.labels, self.holding, _usage_shape(self.usage), self.node, self.gpus, shared)


def _usage_shape(u: Usage) -> tuple[object, ...]:
    return (u.gpu_equivalents, tuple(sorted(u.slices.items())), u.gpus, u.shared_equivalents)


def facts_of(raw: JSON, needs: Needs, cluster: ClusterState = NO_CLUSTER) -> PodFacts | None:
    """The facts of an existing pod; None if it holds no GPU or no longer holds what it had.
    `cluster`: its DRA claims (a pod's claims it names are charged as at admission).

    A condition that fails to evaluate does not hold (as in matching, where it is no match)."""
    return read_facts(raw, needs, cluster)[0]


def read_facts(raw: JSON, needs: Needs, cluster: ClusterState = NO_CLUSTER) -> tuple[PodFacts | None, bool]:
    """facts_of, and whether they were read from the pod alone: not from the cluster (its DRA
    claims, the DeviceClasses serving its extended resources) nor by a CEL condition (which may
    read any field). Those stand for any version of the pod with the same pod_fingerprint, its
    node put in (`moved`)."""
    view = parse_pod(raw)
    alone = not (view.claims or view.extended or needs.conditions)
    return _facts(view, raw, needs, cluster), alone


def may_hold(raw: JSON) -> bool:
    """False only for a pod facts_of reads as holding nothing, told from a glance at its JSON: no
    container or init container names a resource with a domain (every GPU, slice, share and
    extended resource has one), no `resourceClaims`, no KAI or Run:ai share annotation. Most
    pods in a cluster hold no GPU, and the pod watch sees each of them several times; anything
    unexpected in the shape (left to parse_pod to judge) is a maybe."""
    spec, metadata = raw.get("spec"), raw.get("metadata")
    if type(spec) is not dict or "resourceClaims" in spec or type(metadata) is not dict:
        return True
    annotations = metadata.get("annotations")
    if annotations and (
        type(annotations) is not dict or FRACTION_ANNOTATION in annotations or SHARED_MEMORY_ANNOTATION in annotations
    ):
        return True
    for kind in ("containers", "initContainers"):
        containers = spec.get(kind)
        if containers is None:
            continue
        if type(containers) is not list:
            return True
        for container in containers:
            if type(container) is not dict:
                return True
            resources = container.get("resources")
            if resources is None:
                continue
            if type(resources) is not dict:
                return True
            for section in ("limits", "requests"):
                amounts = resources.get(section)
                if amounts and (type(amounts) is not dict or any("/" in name for name in amounts)):
                    return True
    return False


def moved(facts: PodFacts | None, node: str | None) -> PodFacts | None:
    """`facts` of a pod now on `node` (read from a version of it before its binding)."""
    return facts if facts is None or facts.node == node else replace(facts, node=node)


def _facts(view: PodView, raw: JSON, needs: Needs, cluster: ClusterState) -> PodFacts | None:
    if not (view.holds_gpu or view.claims or view.extended or view.gpu_share) or not counts_against_quota(view):
        return None
    usage = pod_usage(view, CATALOG)
    shared: SharedClaims = ()
    if view.claims or view.extended or (view.holds_gpu and cluster.device_classes.nvidia_names):
        claims = claims_charge(view, view.namespace, cluster, CATALOG)
        # A claim it names that is not there counts the pod still: made again, that claim is
        # judged for what it adds to the budgets this pod is charged to.
        if with_claims(usage, claims).is_zero and not (claims.missing and claims.shared):
            return None
        shared = claims.shared
        usage = with_claims(usage, claims, held=[key for key, _ in shared])
        usage = usage if usage.pods else usage.with_pods(1)
    labels = tuple(sorted((key, view.labels[key]) for key in needs.label_keys if key in view.labels))
    holding: frozenset[str] = frozenset()
    if needs.conditions:
        data = RequestInfo(namespace=view.namespace).cel_input(raw)
        holding = frozenset(source for source, condition in needs.conditions.items() if _holds(condition, data))
    return PodFacts(view.namespace, labels, holding, usage, view.node_name, gpus_held(view), shared)


def charges_of(facts: PodFacts, policy_set: PolicySet, namespace_labels: Mapping[str, str] | None) -> Charges:
    """The budgets a pod with these facts is charged to under `policy_set`."""
    matched = policy_set.matching(facts.namespace, dict(facts.labels), None, namespace_labels, facts.holding).policies
    return tuple((p.name, scope_of(p.quota, facts.namespace)) for p in matched if p.quota)


def charged(raw: JSON, policy_set: PolicySet, cluster: ClusterState = NO_CLUSTER) -> tuple[PodFacts, Charges] | None:
    """An existing pod's facts and charges under `policy_set`, in one go (the offline ledger)."""
    facts = facts_of(raw, needs_of(policy_set), cluster)
    if facts is None:
        return None
    return facts, charges_of(facts, policy_set, cluster.namespace_labels(facts.namespace))


def _holds(condition: CompiledExpression, data: CelInput) -> bool:
    try:
        return condition.evaluate_bool(data)
    except CelEvaluationError:
        return False
