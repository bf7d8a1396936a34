"""The engine's front door: one call per admission question, no I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass, replace

from policies.cluster import NO_CLUSTER, ClusterState
from policies.errors import InputError
from policies.judge.controllers import CONTROLLERS, pod_template, replica_warnings
from policies.judge.quota import NoUsage, UsageSource
from policies.judge.validation import Decision, ratchet, subject_of, validate_ephemeral, validate_pod
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
    if not isinstance(kind, str) or kind not in JUDGED_KINDS:
        raise InputError("kind", f"expected a Pod or a pod controller ({', '.join(sorted(CONTROLLERS))}), got {kind}")
    return str(kind)


def _being_deleted(raw: JSON) -> bool:
    metadata = raw.get("metadata")
    return isinstance(metadata, dict) and metadata.get("deletionTimestamp") is not None


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
        """The verdict on a Pod, or on a controller's pod template (quota overruns then warn).

        On UPDATE, what the update changes is judged: an object being deleted passes, and a
        denial its old version earned too only warns (request.old_object); an ephemeral
        container (pods/ephemeralcontainers) is judged for its device access.
        """
        kind = require_judged(raw)
        request = request or RequestInfo()
        if request.operation is Operation.UPDATE:
            if _being_deleted(raw):
                return Decision(True)
            if request.sub_resource == "ephemeralcontainers" and kind == "Pod":
                return validate_ephemeral(raw, self.policy_set, self.parse_quantity, request, cluster)
        decision = self._judge(kind, raw, usage, request, cluster)
        old = request.old_object
        if request.operation is Operation.UPDATE and not decision.allowed and isinstance(old, dict):
            if old.get("kind") not in (None, kind):
                return decision  # an old object of another kind excuses nothing
            try:
                before = self._judge(kind, old, NoUsage(), request, cluster)
            except InputError:
                return decision  # an old version this engine cannot read excuses nothing
            decision = ratchet(decision, before)
        return decision

    def _judge(self, kind: str, raw: JSON, usage: UsageSource, request: RequestInfo, cluster: ClusterState) -> Decision:
        if kind == "Pod":
            return validate_pod(raw, self.policy_set, self.parse_quantity, usage, request, cluster=cluster)
        template = pod_template(raw, request.namespace)
        namespace = template.pod["metadata"]["namespace"]
        creating = request._replace(namespace=namespace, operation=Operation.CREATE, old_object=None)
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
