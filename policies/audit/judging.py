"""Background audit: existing GPU pods judged again against the current policies and nodes.

Admission judges a pod once, against the policies and the nodes of that moment. Later a policy
changes, or a node is re-split into other MIG profiles, and pods admitted before are never looked
at again. The audit looks, as Kyverno's background scan and Gatekeeper's audit do:

- rules and per-pod caps: each pod as the validating webhook would judge it now (deny and audit
  rules `fail`, warn rules `warn`); a pod alone over a namespace limit fails too;
- quotas: each budget whose counted pods now hold more than its limit (a tighter policy, pods
  admitted under `local` consistency) fails, once per scope;
- servable requests: a pod bound to a node whose allocatable no longer offers a GPU resource it
  asks for (re-split into other profiles) fails; one on a node being re-split
  (`nvidia.com/mig.config.state` not `success`) warns;
- env sources (audit_env_sources, when the caller can list them): ConfigMaps and Secrets whose
  keys envFrom would hand over as NVIDIA's device variables, written before the webhook (or a
  policy of their namespace) was there to refuse them.

Pure: the caller lists the pods and nodes, and turns findings into PolicyReports and Events.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.engine import Engine
from policies.errors import InputError
from policies.gpu.capacity import SETTLED, NodeGpus
from policies.gpu.models import CONFIG_STATE_LABEL, MIG_RESOURCE_PREFIX, SHARED_RESOURCE_SUFFIX, WHOLE_GPU_RESOURCE
from policies.judge.env_sources import ENV_SOURCE_KINDS
from policies.judge.ledger import Ledger
from policies.judge.pod_facts import PodFacts, charged
from policies.judge.quota import NoUsage, dimensions
from policies.model.policy import Action
from policies.review.cluster import ClusterState
from policies.review.request import RequestInfo

NODE_POLICY = "gpu-admission"  # findings about nodes are not any one policy's
SERVABLE_RULE = "servable-on-node"


@dataclass(frozen=True, slots=True)
class Finding:
    namespace: str  # "" for a policy-wide budget
    pod: str  # "" for a budget (scope) finding
    uid: str
    policy: str
    rule: str
    result: str  # fail | warn
    message: str
    kind: str = "Pod"  # of the object named `pod`: a Pod, or a ConfigMap or Secret (env sources)


@dataclass(slots=True)
class AuditReport:
    findings: list[Finding] = field(default_factory=list)
    judged: Counter[str] = field(default_factory=Counter)  # GPU pods judged, per namespace
    unreadable: int = 0  # pods whose objects the engine could not read (malformed)
    env_sources: Counter[str] = field(default_factory=Counter)  # ConfigMaps and Secrets judged, per namespace

    def violations(self) -> Counter[tuple[str, str]]:
        """(policy, rule) -> findings, for the metric."""
        return Counter((f.policy, f.rule) for f in self.findings)


_RESULTS = {Action.DENY: "fail", Action.AUDIT: "fail", Action.WARN: "warn"}


def audit_pods(
    engine: Engine, pods: Iterable[Mapping[str, Any]], cluster: ClusterState, nodes: Mapping[str, NodeGpus]
) -> AuditReport:
    """Judges `pods` one by one (a stream of list pages: none is kept, only what each charges)."""
    report = AuditReport()
    ledger = Ledger()
    for raw in pods:
        try:
            # What charging reads of the pod: None for one holding no GPU or finished.
            found = charged(dict(raw), engine.policy_set, cluster)
        except InputError:
            report.unreadable += 1
            continue
        if found is None:
            continue
        facts, charges = found
        ledger.charge(charges, facts.usage, facts.shared)
        metadata = raw.get("metadata") or {}
        namespace, name, uid = facts.namespace, str(metadata.get("name") or ""), str(metadata.get("uid") or "")
        report.judged[namespace] += 1
        decision = engine.validate(dict(raw), NoUsage(), request=RequestInfo(namespace=namespace), cluster=cluster)
        for verdict in decision.verdicts:
            result = _RESULTS[verdict.action]
            report.findings.append(Finding(namespace, name, uid, verdict.policy, verdict.rule, result, verdict.message))
        report.findings.extend(_servable(namespace, name, uid, facts, nodes))
    report.findings.extend(_over_budget(engine, ledger))
    return report


def audit_env_sources(
    engine: Engine, objects: Iterable[Mapping[str, Any]], report: AuditReport, cluster: ClusterState
) -> None:
    """Judges ConfigMaps and Secrets (a stream of list pages) as validate-env-sources would now,
    into `report`; values are read, never kept or quoted."""
    for raw in objects:
        kind = raw.get("kind")
        if kind not in ENV_SOURCE_KINDS:
            continue
        metadata = raw.get("metadata")
        fields = metadata if isinstance(metadata, Mapping) else {}
        namespace, name, uid = (str(fields.get(key) or "") for key in ("namespace", "name", "uid"))
        try:
            decision = engine.validate(dict(raw), NoUsage(), RequestInfo(namespace=namespace), cluster)
        except InputError:
            report.unreadable += 1
            continue
        report.env_sources[namespace] += 1
        for verdict in decision.verdicts:
            result = _RESULTS[verdict.action]
            report.findings.append(
                Finding(namespace, name, uid, verdict.policy, verdict.rule, result, verdict.message, kind)
            )


def _servable(namespace: str, name: str, uid: str, facts: PodFacts, nodes: Mapping[str, NodeGpus]) -> list[Finding]:
    node = nodes.get(facts.node) if facts.node else None
    if node is None:
        return []
    state = node.labels.get(CONFIG_STATE_LABEL)
    if state is not None and state != SETTLED:
        message = f"runs on {node.name}, being re-split into MIG profiles ({CONFIG_STATE_LABEL}={state})"
        return [Finding(namespace, name, uid, NODE_POLICY, SERVABLE_RULE, "warn", message)]
    missing = [r for r, _ in facts.gpus if _device_plugin_resource(r) and not node.allocatable.get(r)]
    if not missing:
        return []
    offered = ", ".join(sorted(r for r, n in node.allocatable.items() if n)) or "no GPU resource"
    message = f"asks for {', '.join(missing)}, which its node {node.name} no longer offers ({offered})"
    return [Finding(namespace, name, uid, NODE_POLICY, SERVABLE_RULE, "fail", message)]


def _device_plugin_resource(resource: str) -> bool:
    """Whole GPUs and MIG slices as NVIDIA's device plugin offers them (not its time-sliced
    replicas, not HAMi's shares: those systems account for their own)."""
    device_plugin = resource == WHOLE_GPU_RESOURCE or resource.startswith(MIG_RESOURCE_PREFIX)
    return device_plugin and not resource.endswith(SHARED_RESOURCE_SUFFIX)


def _over_budget(engine: Engine, ledger: Ledger) -> list[Finding]:
    findings: list[Finding] = []
    for policy_name, scope in sorted(ledger.held()):
        policy = engine.policy_set.by_name(policy_name)
        if policy is None or policy.quota is None:
            continue
        quota = policy.quota
        usage = ledger.usage(policy, scope)
        for dimension, path, amount, limit in dimensions(quota.limits, usage, quota.shared_weight):
            if amount > limit:
                where = scope or f"policy-wide {policy.name}"
                message = f"{where}: {dimension} held {amount}, over the limit of {limit} (policy {policy.name})"
                result = "warn" if quota.action is Action.WARN else "fail"
                findings.append(Finding(scope, "", "", policy.name, f"quota.{path}", result, message))
    return findings
