"""The engine's front door: one call per admission question, no I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from policies.errors import InputError
from policies.judge.apply_time import (
    at_apply,
    is_budget,
    made_by_note,
    over_alone,
    replica_warnings,
    scale_verdicts,
    unread,
)
from policies.judge.claim_objects import (
    is_claim_object,
    is_namespace,
    judge_admin_access_label,
    judge_claim_object,
)
from policies.judge.controllers import Template, pod_templates, put_back, scaled_to, workload_kind
from policies.judge.env_sources import ENV_SOURCE_KINDS, judge_env_source
from policies.judge.quota import NoUsage, UsageSource
from policies.judge.usage import EMPTY, Usage
from policies.judge.validation import Decision, judge_pod, ratchet, subject_of, validate_ephemeral, validate_pod
from policies.judge.verdict import Verdict
from policies.model.policy import Action
from policies.model.policyset import PolicySet
from policies.model.workloads import Form, unread_version
from policies.mutate.mutation import MutationResult, mutate_pod
from policies.planning.plan import Problem
from policies.review.cluster import NO_CLUSTER, ClusterState
from policies.review.document import JSON, Change
from policies.review.request import Operation, RequestInfo

# Whether this module runs compiled by mypyc (an extension module, as the image ships it) or as
# Python source (tools/compile_engine.py): the same decisions, at about half the instructions.
COMPILED = not __file__.endswith(".py")


def _is_pod(api_version: object, kind: object) -> bool:
    return kind == "Pod" and api_version in ("v1", None)


def require_pod(raw: JSON) -> None:
    if not isinstance(raw, dict):
        raise InputError("", "expected a Pod object")
    if not _is_pod(raw.get("apiVersion"), raw.get("kind")):
        raise InputError("kind", f"expected a v1 Pod, got {raw.get('apiVersion')}/{raw.get('kind')}")


def _is_env_source(api_version: object, kind: object) -> bool:
    return kind in ENV_SOURCE_KINDS and api_version in ("v1", None)


def require_judged(raw: JSON, policy_set: PolicySet) -> str:
    """The object's kind, if the engine judges it: a Pod, a workload whose templates it knows, a
    ConfigMap or Secret (what envFrom could take from it), or a DRA ResourceClaim or template."""
    if not isinstance(raw, dict):
        raise InputError("", "expected a Kubernetes object")
    kind = raw.get("kind")
    if _is_pod(raw.get("apiVersion"), kind):
        return "Pod"
    if _is_env_source(raw.get("apiVersion"), kind) or is_claim_object(raw.get("apiVersion"), kind):
        return str(kind)
    if is_namespace(raw.get("apiVersion"), kind):
        return "Namespace"
    workload_kind(raw, policy_set.workloads)
    return str(kind)


def _being_deleted(raw: JSON) -> bool:
    metadata = raw.get("metadata")
    return isinstance(metadata, dict) and metadata.get("deletionTimestamp") is not None


@mypyc_attr(allow_interpreted_subclasses=True)  # tests wrap it: a subclass holds each patch to its object
@dataclass(frozen=True, slots=True)
class Engine:
    policy_set: PolicySet

    def mutate(
        self, raw: JSON, request: RequestInfo | None = None, cluster: ClusterState = NO_CLUSTER
    ) -> MutationResult:
        require_pod(raw)
        return mutate_pod(raw, self.policy_set, request, cluster)

    def judges(self, api_version: object, kind: object) -> bool:
        """Whether objects of this kind are judged: Pods, workloads whose templates are known,
        ConfigMaps and Secrets, DRA ResourceClaims and ResourceClaimTemplates, and Namespaces (the
        label that opens adminAccess)."""
        return (
            _is_pod(api_version, kind)
            or _is_env_source(api_version, kind)
            or is_claim_object(api_version, kind)
            or is_namespace(api_version, kind)
            or self.policy_set.workloads.find(api_version, kind) is not None
        )

    def mutate_any(
        self, raw: JSON, request: RequestInfo | None = None, cluster: ClusterState = NO_CLUSTER
    ) -> MutationResult:
        """A Pod as the mutating webhook leaves it; a workload with each pod template as the
        mutating webhook will leave its pods (what `gpu-admission mutate` shows). Changes and
        warnings of a template name its path."""
        kind = require_judged(raw, self.policy_set)
        if kind == "Pod":
            return self.mutate(raw, request, cluster)
        if kind in ENV_SOURCE_KINDS or kind == "Namespace" or is_claim_object(raw.get("apiVersion"), kind):
            return MutationResult(raw, (), (), (), (), ())  # judged, never changed
        request = request or RequestInfo()
        result: JSON = raw
        changes: list[Change] = []
        warnings: list[str] = []
        problems: list[Problem] = []
        policies: list[str] = []
        made_by = workload_kind(raw, self.policy_set.workloads).made_by
        for template in pod_templates(raw, request.namespace, self.policy_set.workloads):
            mutation = self._mutate_template(template, request, cluster)
            if template.found is not None and template.found.form is Form.RESOURCES:
                # No template to write to: what the pod webhook will do is said, not done.
                if mutation.policies:
                    warnings.append(made_by_note(template.path, made_by, mutation.changes))
            else:
                result = put_back(result, template, mutation.object) if mutation.changed else result
                changes += [c.under(template.path) for c in mutation.changes]
            warnings += [f"{template.path}: {w}" for w in mutation.warnings]
            problems += mutation.problems
            policies += [p for p in mutation.policies if p not in policies]
        return MutationResult(result, (), tuple(changes), tuple(warnings), tuple(problems), tuple(policies))

    def _mutate_template(self, template: Template, request: RequestInfo, cluster: ClusterState) -> MutationResult:
        namespace = template.pod["metadata"]["namespace"]
        creating = request._replace(namespace=namespace, operation=Operation.CREATE, old_object=None)
        try:
            return mutate_pod(template.pod, self.policy_set, creating, cluster)
        except InputError as error:
            raise InputError(f"{template.path}.{error.path}", error.message) from None

    def validate(
        self, raw: JSON, usage: UsageSource, request: RequestInfo | None = None, cluster: ClusterState = NO_CLUSTER
    ) -> Decision:
        """The verdict on a Pod, or on a controller's pod template (quota overruns then warn).

        On UPDATE, what the update changes is judged: an object being deleted passes, and a
        denial its old version earned too only warns (request.old_object); an ephemeral
        container (pods/ephemeralcontainers) is judged for its device access and by the rules.
        """
        return self.judge(raw, usage, request, cluster).settle(usage)

    def judge(
        self, raw: JSON, usage: UsageSource, request: RequestInfo | None = None, cluster: ClusterState = NO_CLUSTER
    ) -> Decision:
        """`validate`, but a Pod's budgets are left to `Decision.settle`: the webhook judges the
        rest once, outside its counters' lock, and settles under it, as it reserves. `usage` is
        read here only for what reserves nothing (a workload's replicas, a claim's creation)."""
        kind = require_judged(raw, self.policy_set)
        request = request or RequestInfo()
        judge = self._judge
        if request.operation is Operation.UPDATE:
            if _being_deleted(raw):
                return Decision(True)
            if request.sub_resource == "ephemeralcontainers" and kind == "Pod":
                judge = self._judge_ephemeral
        decision = judge(kind, raw, usage, request, cluster)
        old = request.old_object
        if request.operation is Operation.UPDATE and not decision.allowed and isinstance(old, dict):
            if old.get("kind") not in (None, kind):
                return decision  # an old object of another kind excuses nothing
            try:
                before = judge(kind, old, NoUsage(), request, cluster).settle(NoUsage())
            except InputError:
                return decision  # an old version this engine cannot read excuses nothing
            decision = ratchet(decision, before)
        return decision

    def _judge_ephemeral(
        self, kind: str, raw: JSON, usage: UsageSource, request: RequestInfo, cluster: ClusterState
    ) -> Decision:
        return validate_ephemeral(raw, self.policy_set, request, cluster)

    def _judge(self, kind: str, raw: JSON, usage: UsageSource, request: RequestInfo, cluster: ClusterState) -> Decision:
        if kind == "Pod":
            return judge_pod(raw, self.policy_set, request, cluster=cluster)
        if kind in ENV_SOURCE_KINDS:
            return judge_env_source(raw, kind, request.namespace, self.policy_set, cluster)
        if is_claim_object(raw.get("apiVersion"), kind):
            budgets = usage if request.operation is Operation.CREATE else None  # its spec never changes after
            return judge_claim_object(raw, kind, request.namespace, self.policy_set, cluster, budgets)
        if kind == "Namespace":
            return judge_admin_access_label(raw, self.policy_set)
        entry = workload_kind(raw, self.policy_set.workloads)
        if unread_version(raw.get("apiVersion"), entry):
            return Decision(True, (unread(raw, entry),))
        found = pod_templates(raw, request.namespace, self.policy_set.workloads)
        running = self._running(kind, request, cluster)
        made_by = entry.made_by
        verdicts: list[Verdict] = []
        notes: list[str] = []
        total, policies = EMPTY, []
        for template in found:
            was = running.get(template.path)
            decision, changes = self._judge_template(raw, template, usage, request, cluster, running=was)
            verdicts += decision.verdicts
            total = total + decision.usage
            policies += [p for p in decision.policies if p not in policies]
            if made_by and not decision.usage.empty:  # GPU pods only: others never meet this webhook
                notes.append(made_by_note(template.path, made_by, changes))
        allowed = not any(v.action is Action.DENY for v in verdicts)
        return Decision(allowed, tuple(verdicts), total, tuple(policies), notes=tuple(notes))

    def _running(self, kind: str, request: RequestInfo, cluster: ClusterState) -> dict[str, tuple[int, Usage]]:
        """On an UPDATE, each template of the workload as it was: its replicas, and what a pod of
        it holds (those pods are counted already, and are not counted again)."""
        old = request.old_object
        if request.operation is not Operation.UPDATE or not isinstance(old, dict) or old.get("kind") != kind:
            return {}
        try:
            found = pod_templates(old, request.namespace, self.policy_set.workloads)
            return {t.path: (t.replicas, self._pod_usage(t, request, cluster)) for t in found}
        except InputError:
            return {}  # an old version this engine cannot read: every replica counts

    def _pod_usage(self, template: Template, request: RequestInfo, cluster: ClusterState) -> Usage:
        creating = request._replace(namespace=template.pod["metadata"]["namespace"], operation=Operation.CREATE)
        mutated = mutate_pod(template.pod, self.policy_set, creating, cluster).object
        return judge_pod(mutated, self.policy_set, creating, cluster=cluster).usage

    def validate_scale(
        self,
        raw: JSON,
        was: int,
        now: int,
        usage: UsageSource,
        request: RequestInfo | None = None,
        cluster: ClusterState = NO_CLUSTER,
    ) -> Decision:
        """The verdict on scaling workload `raw` (`kubectl scale`, an autoscaler: its Scale
        subresource) from `was` to `now` replicas. A scale-up only: each template whose pods it
        adds is judged as at apply, but the budgets by the pods added, at the policy's action,
        since they are made now (a scale-down or a workload that is not judged passes)."""
        if now <= was or not self.judges(raw.get("apiVersion"), raw.get("kind")):
            return Decision(True)
        request = request or RequestInfo()
        workloads = self.policy_set.workloads
        before = {t.path: t.replicas for t in pod_templates(scaled_to(raw, was), request.namespace, workloads)}
        verdicts: list[Verdict] = []
        total, policies = EMPTY, []
        for template in pod_templates(scaled_to(raw, now), request.namespace, workloads):
            counted = before.get(template.path, 0)
            if template.replicas <= counted:
                continue
            decision, _ = self._judge_template(raw, template, usage, request, cluster, scaled=counted)
            verdicts += decision.verdicts
            total = total + decision.usage
            policies += [p for p in decision.policies if p not in policies]
        allowed = not any(v.action is Action.DENY for v in verdicts)
        return Decision(allowed, tuple(verdicts), total, tuple(policies))

    def _judge_template(
        self,
        raw: JSON,
        template: Template,
        usage: UsageSource,
        request: RequestInfo,
        cluster: ClusterState,
        scaled: int | None = None,
        running: tuple[int, Usage] | None = None,
    ) -> tuple[Decision, tuple[Change, ...]]:
        """The template's verdict, and what the mutating webhook will change in its pods.

        A budget its pods would overrun is a warning (pods are admitted one by one later, and
        others may leave), unless one pod alone holds more than the limit: then every pod it
        makes will be denied, and the workload is, at apply time, like a per-pod cap. `scaled`:
        the template is scaled up from this many pods (validate_scale); `running`: an UPDATE's
        replicas and pod usage of the template as it was (replica_warnings)."""
        namespace = template.pod["metadata"]["namespace"]
        creating = request._replace(namespace=namespace, operation=Operation.CREATE, old_object=None)
        subject = f"{subject_of(raw, namespace)} {template.path}"
        try:
            # The workload's pods will pass the mutating webhook first: judge them as they will be.
            mutation = mutate_pod(template.pod, self.policy_set, creating, cluster)
            decision = validate_pod(mutation.object, self.policy_set, usage, creating, subject, cluster)
        except InputError as error:
            raise InputError(f"{template.path}.{error.path}", error.message) from None
        matched = tuple(p for p in self.policy_set.policies if p.name in decision.policies)
        if scaled is not None:
            kept = [v for v in decision.verdicts if not is_budget(v)]
            kept += [
                v.about(subject)
                for v in scale_verdicts(
                    matched, namespace, decision.own_usage, scaled, template.replicas, usage, decision.shared
                )
            ]
            allowed = not any(v.action is Action.DENY for v in kept)
            return decision._replace(allowed=allowed, verdicts=tuple(kept)), ()
        certain = over_alone(matched, decision.usage)
        verdicts = [at_apply(v, certain) for v in decision.verdicts]
        if running is not None:  # one pod more on top of those running counts them twice: replica_warnings says
            verdicts = [v for v in verdicts if not is_budget(v) or (v.policy, v.rule) in certain]
        verdicts += [
            v.about(subject)
            for v in replica_warnings(
                matched, namespace, decision.own_usage, template.replicas, usage, running, decision.shared
            )
        ]
        allowed = not any(v.action is Action.DENY for v in verdicts)
        return Decision(allowed, tuple(verdicts), decision.usage, decision.policies), mutation.changes
