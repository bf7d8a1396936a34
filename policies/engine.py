"""The engine's front door: one call per admission question, no I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass, replace

from policies.cluster import NO_CLUSTER, ClusterState
from policies.errors import InputError
from policies.judge.controllers import CONTROLLERS, pod_template, replica_warnings
from policies.judge.quota import UsageSource
from policies.judge.validation import Decision, subject_of, validate_pod
from policies.model.policy import Action
from policies.model.policyset import PolicySet
from policies.mutate.document import JSON
from policies.mutate.mutation import MutationResult, mutate_pod
from policies.quantity import QuantityParser
from policies.request import Operation, RequestInfo

JUDGED_KINDS = frozenset({"Pod", *CONTROLLERS})


def require_pod(raw: JSON) -> None:
    if not isinstance(raw, dict):
        raise InputError("", "expected a Pod object")
    if raw.get("kind") != "Pod" or raw.get("apiVersion") not in ("v1", None):
        raise InputError("kind", f"expected a v1 Pod, got {raw.get('apiVersion')}/{raw.get('kind')}")


def require_judged(raw: JSON) -> str:
    if not isinstance(raw, dict):
        raise InputError("", "expected a Kubernetes object")
    kind = raw.get("kind")
    if kind not in JUDGED_KINDS:
        raise InputError("kind", f"expected a Pod or a pod controller ({', '.join(sorted(CONTROLLERS))}), got {kind}")
    return str(kind)


@dataclass(frozen=True)
class Engine:
    policy_set: PolicySet
    parse_quantity: QuantityParser

    def mutate(
        self, raw: JSON, request: RequestInfo | None = None, cluster: ClusterState = NO_CLUSTER
    ) -> MutationResult:
        require_pod(raw)
        return mutate_pod(raw, self.policy_set, self.parse_quantity, request, cluster)

    def validate(
        self, raw: JSON, usage: UsageSource, request: RequestInfo | None = None, cluster: ClusterState = NO_CLUSTER
    ) -> Decision:
        """The verdict on a Pod, or on a controller's pod template (quota overruns then warn)."""
        kind = require_judged(raw)
        if kind == "Pod":
            return validate_pod(raw, self.policy_set, self.parse_quantity, usage, request, cluster=cluster)
        template = pod_template(raw)
        namespace = template.pod["metadata"].get("namespace") or (request.namespace if request else "")
        creating = (request or RequestInfo(namespace=namespace))._replace(operation=Operation.CREATE)
        subject = f"{subject_of(raw, namespace)} {template.path}"
        try:
            # The controller's pods will pass the mutating webhook first: judge them as they will be.
            pod = mutate_pod(template.pod, self.policy_set, self.parse_quantity, creating, cluster).object
            decision = validate_pod(pod, self.policy_set, self.parse_quantity, usage, creating, subject, cluster)
        except InputError as error:
            raise InputError(f"{template.path}.{error.path}", error.message) from None
        verdicts = [
            replace(v, action=Action.WARN) if v.rule.startswith("quota.") and ".perPod." not in v.rule else v
            for v in decision.verdicts
        ]
        matched = tuple(p for p in self.policy_set.policies if p.name in decision.policies)
        verdicts += [
            v.about(subject) for v in replica_warnings(matched, namespace, decision.usage, template.replicas, usage)
        ]
        allowed = not any(v.action is Action.DENY for v in verdicts)
        return Decision(allowed, tuple(verdicts), decision.usage, decision.policies)
