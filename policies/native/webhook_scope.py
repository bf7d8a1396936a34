"""What the shipped webhook configurations send to the webhook, described once: which resources
and operations each webhook takes, the namespaces it leaves out, its objectSelector and its
matchConditions. tools/webhook_manifests.py renders them as the kustomize and Helm files; the
offline CLI (`mutate -f`, `validate -f`) reads them to judge only what the cluster would send,
evaluating the same conditions with the same CEL host.

The defaults are kustomize's (the Helm chart may exclude more namespaces: `excludedNamespaces`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache

from policies.errors import InputError
from policies.judge.controllers import pod_templates
from policies.model.cel import CelEvaluationError, CelInput, CompiledExpression, compile_expression
from policies.model.workload_kinds import BUILT_IN
from policies.model.workloads import WorkloadTable
from policies.native.reach import (
    ANY_EXTENDED,
    DEVICE_ENV,
    EXCLUDED,
    MIRROR_PODS,
    NAMESPACE,
    or_shared_before,
    pod_condition,
)
from policies.native.workload_conditions import custom_kinds, kind_condition

# A ConfigMap's or Secret's keys that envFrom would hand over as the toolkit's variables.
NAMED_DEVICE_KEYS = f"has(object.data) && {DEVICE_ENV}.exists(k, k in object.data)"
# A Scale that asks for more replicas than it had (absent, a count is 0).
SCALE_UP = (
    "has(object.spec) && has(object.spec.replicas) && object.spec.replicas > "
    "(has(oldObject.spec) && has(oldObject.spec.replicas) ? oldObject.spec.replicas : 0)"
)
ADMIN_ACCESS_LABELLED = (
    "has(object.metadata.labels) && 'resource.kubernetes.io/admin-access' in object.metadata.labels && "
    "object.metadata.labels['resource.kubernetes.io/admin-access'] == 'true'"
)
POLICY_LABEL = ("gpu-admission.io/policy", "true")


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of a webhook: an API group's resources under some operations."""

    group: str
    resources: tuple[str, ...]
    operations: tuple[str, ...] = ("CREATE", "UPDATE")
    versions: str = "v1"  # or "*"
    cluster: bool = False  # cluster-scoped resources

    def flow(self) -> str:
        """The rule as the configurations write it (YAML flow style)."""
        group = '""' if not self.group else self.group
        versions = "'*'" if self.versions == "*" else self.versions
        scope = "Cluster" if self.cluster else "Namespaced"
        return (
            f"{{apiGroups: [{group}], apiVersions: [{versions}], operations: [{', '.join(self.operations)}], "
            f"resources: [{', '.join(self.resources)}], scope: {scope}}}"
        )


Condition = tuple[str, tuple[str, ...]]  # its name, the lines of its expression


@dataclass(frozen=True, slots=True)
class Webhook:
    name: str
    path: str  # /mutate or /validate
    rules: tuple[Rule | str, ...]  # a str: a comment line among them
    critical: bool = False  # failurePolicy the deployment's (Fail by default), else Ignore
    side_effects: str = "None"
    reinvoke: bool = False
    own_namespace_excluded: bool = True
    labels: tuple[tuple[str, str], ...] = ()  # objectSelector matchLabels
    conditions: tuple[Condition, ...] = ()
    comment: tuple[str, ...] = ()

    @property
    def excluded(self) -> tuple[str, ...]:
        return (*EXCLUDED, NAMESPACE) if self.own_namespace_excluded else tuple(EXCLUDED)

    def takes(self, group: str, resource: str) -> bool:
        """Whether a CREATE of `resource` (plural, of API `group`) is one of its rules'."""
        return any(
            isinstance(rule, Rule)
            and rule.group == group
            and resource in rule.resources
            and "CREATE" in rule.operations
            for rule in self.rules
        )


POD_COMMENT = (
    "Every pod that could reach a GPU, so an outage never blocks ordinary pods: one asking for an",
    "nvidia.com/ resource (init containers too), running under an NVIDIA RuntimeClass, setting",
    "NVIDIA_VISIBLE_DEVICES & co. in any container (ephemeral ones too: the NVIDIA runtime may be",
    "the node's default) or taking envFrom under a prefix of those names, mounting a hostPath that",
    "may lead to the node's devices (any path with dev, nvidia, a dot or a double slash in it, or /),",
    "naming CDI devices, holding DRA claims (what they allocate is looked up), or asking for Triton.",
    "Kubelets' mirror pods are skipped; the annotation alone is anyone's to write.",
)
EXTENDED_COMMENT = (
    "Validation also sees pods asking for any extended resource (a name with a domain): a DRA",
    "DeviceClass may serve any name, and only the cluster's classes say whether it is a GPU.",
)


def _pods(*operations: str) -> Rule:
    return Rule("", ("pods",), operations)


MUTATING = (
    Webhook(
        "mutate.gpu-admission.io",
        "/mutate",
        (_pods("CREATE"),),
        critical=True,
        reinvoke=True,
        conditions=(
            ("pods-that-can-reach-a-gpu", tuple(pod_condition("object"))),
            ("not-kubelet-mirror-pods", tuple(MIRROR_PODS)),
        ),
        comment=POD_COMMENT,
    ),
)


def _controllers() -> Iterator[Webhook]:
    controllers = (
        ("validate-controllers.gpu-admission.io", "object.spec.template", "apps", Rule("apps", _APPS)),
        ("validate-jobs.gpu-admission.io", "object.spec.template", "batch", Rule("batch", ("jobs",))),
        (
            "validate-cronjobs.gpu-admission.io",
            "object.spec.jobTemplate.spec.template",
            "batch",
            Rule("batch", ("cronjobs",)),
        ),
    )
    for index, (name, template, _, rule) in enumerate(controllers):
        comment = (
            (
                "Controllers: their pod templates are judged so `kubectl apply --dry-run=server` gives",
                "feedback; only templates that could reach a GPU (the pod condition, on the template).",
            )
            if index == 0
            else ()
        )
        condition = tuple(pod_condition(template, template=True, asks=ANY_EXTENDED))
        yield Webhook(
            name, "/validate", (rule,), conditions=(("templates-that-can-reach-a-gpu", condition),), comment=comment
        )


_APPS = ("deployments", "statefulsets", "daemonsets", "replicasets")


def _workloads() -> Iterator[Webhook]:
    for index, entry in enumerate(custom_kinds()):
        comment = (
            (
                "Workloads of the table in policies/model/workloads.py (Kubeflow, Ray, LeaderWorkerSet, JobSet,",
                "Argo, KServe, Knative): their pod templates are judged as the pods they will make. One",
                "webhook per kind, its condition generated from the table: objects whose templates ask for",
                "no GPU stay out, and no expression reads another kind's fields.",
            )
            if index == 0
            else ()
        )
        rule = Rule(entry.group, (entry.resource,), versions="*", cluster=entry.cluster_scoped)
        yield Webhook(
            f"{entry.resource}.{entry.group}.workloads.gpu-admission.io",
            "/validate",
            (rule,),
            conditions=(("templates-that-ask-for-a-gpu", (kind_condition(entry),)),),
            comment=comment,
        )


@cache
def validating() -> tuple[Webhook, ...]:
    pods = Webhook(
        "validate-pods.gpu-admission.io",
        "/validate",
        (
            "# pods/ephemeralcontainers: a debug container is judged for its device access like any other;",
            "# pods/resize: a pod's CPU and memory resized in place, judged as it is left (rules, caps).",
            Rule("", ("pods", "pods/ephemeralcontainers", "pods/resize")),
        ),
        critical=True,
        side_effects="NoneOnDryRun  # strict quotas write a Lease per admission, never on a dry run",
        conditions=(
            ("pods-that-can-reach-a-gpu", tuple(or_shared_before(pod_condition("object", asks=ANY_EXTENDED)))),
            ("not-kubelet-mirror-pods", tuple(MIRROR_PODS)),
        ),
        comment=(*POD_COMMENT, *EXTENDED_COMMENT),
    )
    scale = Webhook(
        "validate-scale.gpu-admission.io",
        "/validate",
        (
            Rule("apps", ("deployments/scale", "statefulsets/scale", "replicasets/scale"), ("UPDATE",)),
            Rule("leaderworkerset.x-k8s.io", ("leaderworkersets/scale",), ("UPDATE",), versions="*"),
        ),
        conditions=(("scale-ups", (SCALE_UP,)),),
        comment=(
            "Scale subresources (`kubectl scale`, autoscalers): a scale-up is judged by the workload's",
            "templates for the pods it adds, the budgets at the policy's action. Only scale-ups are",
            "sent; Ignore, since the pods it adds are still judged one by one as they are made.",
        ),
    )
    claims = Webhook(
        "validate-claims.gpu-admission.io",
        "/validate",
        (Rule("resource.k8s.io", ("resourceclaims", "resourceclaimtemplates"), versions="*"),),
        critical=True,
        comment=(
            "DRA ResourceClaims and ResourceClaimTemplates, judged at their own creation by the policies",
            "that hold for every pod of their namespace: profiles, models, multi-GPU, adminAccess, device",
            "taints, opaque configuration, allowed classes, per-pod caps (docs/dra.md).",
        ),
    )
    admin_access = Webhook(
        "validate-admin-access.gpu-admission.io",
        "/validate",
        (Rule("", ("namespaces",), cluster=True),),
        critical=True,
        conditions=(("labelled-for-admin-access", (ADMIN_ACCESS_LABELLED,)),),
        comment=(
            "Namespaces labelled resource.kubernetes.io/admin-access=true, all Kubernetes asks before it",
            "stores DRA claims with adminAccess (devices allocated to others): refused unless a policy",
            "allows draAdminAccess. Only such namespaces are sent.",
        ),
    )
    env_sources = Webhook(
        "validate-env-sources.gpu-admission.io",
        "/validate",
        (Rule("", ("configmaps", "secrets")),),
        critical=True,
        conditions=(("keys-that-name-nvidia-devices", (NAMED_DEVICE_KEYS,)),),
        comment=(
            "ConfigMaps and Secrets with a key named NVIDIA_VISIBLE_DEVICES & co.: an envFrom without a",
            "prefix, in any pod, would hand their value to the NVIDIA runtime. Only those are sent",
            "(a map lookup per name, whatever the object's size); their values never leave the webhook.",
        ),
    )
    policies = Webhook(
        "validate-policies.gpu-admission.io",
        "/validate",
        (Rule("", ("configmaps",)),),
        own_namespace_excluded=False,
        labels=(POLICY_LABEL,),
        comment=(
            "Policy ConfigMaps: a broken policy is refused at `kubectl apply` (and --dry-run=server) with",
            "its lint errors. Its own namespace is included: that is where policies live.",
        ),
    )
    gpupolicies = Webhook(
        "validate-gpupolicies.gpu-admission.io",
        "/validate",
        (Rule("gpu-admission.io", ("gpupolicies",), versions="*", cluster=True),),
        comment=(
            "GPUPolicy objects: the same verdict as a policy ConfigMap's, after the API server's own",
            "schema check. Ignore, as for ConfigMaps: a policy shipped with the webhook still applies, and",
            "one that got in broken says so on its status and keeps its last good version (or fails closed).",
        ),
    )
    return (pods, *_controllers(), *_workloads(), scale, claims, admin_access, env_sources, policies, gpupolicies)


@cache
def _compiled(expression: str) -> CompiledExpression:
    return compile_expression(expression)


def _plural(kind: str) -> str:
    lower = kind.lower()
    return lower[:-1] + "ies" if lower.endswith("y") else lower + "s"


def _resource(document: Mapping[str, object]) -> tuple[str, str]:
    """(API group, plural resource) of a document, as the API server names what it stores."""
    api_version, kind = str(document.get("apiVersion") or ""), str(document.get("kind") or "")
    group = api_version.rpartition("/")[0]
    for entry in custom_kinds():
        if entry.group == group and entry.kind == kind:
            return group, entry.resource
    return group, _plural(kind)


def why_not_sent(
    path: str,
    document: Mapping[str, object],
    namespace: str,
    user: Mapping[str, object] | None = None,
    table: WorkloadTable | None = None,
) -> str | None:
    """None where a CREATE of `document` in `namespace` (a Namespace's own name, for one) reaches
    some webhook of `path` (/mutate or /validate) as the shipped configurations send it; else why
    not, in a line. A condition that
    fails to evaluate sends the object (the API server calls the webhook, or fails closed).

    A workload and /mutate: the mutating webhook is sent the pods it makes, not the workload, so
    it is judged if one of its pod templates (`table` says where they are) would be sent as a pod."""
    if path == "/mutate" and document.get("kind") != "Pod" and table is not None:
        return _why_not_its_pods(document, namespace, user, table)
    hooks = MUTATING if path == "/mutate" else validating()
    group, resource = _resource(document)
    if table is not None and _taught(document, table):
        return None  # a kind the policies teach: the admin who teaches it sends it (docs/workloads.md)
    taking = [hook for hook in hooks if hook.takes(group, resource)]
    if not taking:
        return f"no {path.lstrip('/')} webhook is sent {resource}{f' of {group}' if group else ''}"
    # A cluster-scoped object has no namespace to leave out, but a Namespace is matched as itself.
    unplaced = _cluster_scoped(taking[0], group, resource) and resource != "namespaces"
    placed = [hook for hook in taking if unplaced or namespace not in hook.excluded]
    if not placed:
        return f"namespace {namespace} is excluded by the shipped webhooks"
    metadata = document.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    labelled = [hook for hook in placed if all(_labelled(labels, key, value) for key, value in hook.labels)]
    if not labelled:
        return "its labels leave it out of the shipped webhooks' objectSelector"
    data = CelInput({"object": dict(document), "oldObject": None, "request": {"userInfo": dict(user or {})}})
    for hook in labelled:
        if all(_holds(" ".join(lines), data) for _, lines in hook.conditions):
            return None
    names = sorted({name for hook in labelled for name, _ in hook.conditions})
    return f"the shipped webhooks' matchConditions leave it out ({', '.join(names)})"


def _taught(document: Mapping[str, object], table: WorkloadTable) -> bool:
    entry = table.find(document.get("apiVersion"), document.get("kind"))
    return entry is not None and entry not in BUILT_IN


def _why_not_its_pods(
    document: Mapping[str, object], namespace: str, user: Mapping[str, object] | None, table: WorkloadTable
) -> str | None:
    try:
        made = pod_templates(dict(document), namespace, table)
    except InputError:
        return None  # the engine says what is wrong with it
    reasons = [why_not_sent("/mutate", template.pod, namespace, user) for template in made]
    if not reasons:
        return "no pod template the engine reads"
    if any(reason is None for reason in reasons):
        return None
    return f"its pods: {reasons[0]}"


def _cluster_scoped(hook: Webhook, group: str, resource: str) -> bool:
    return any(isinstance(r, Rule) and r.cluster and r.group == group and resource in r.resources for r in hook.rules)


def _labelled(labels: object, key: str, value: str) -> bool:
    return isinstance(labels, Mapping) and labels.get(key) == value


def _holds(expression: str, data: CelInput) -> bool:
    try:
        return _compiled(expression).evaluate_bool(data)
    except CelEvaluationError:
        return True
