"""Pod controllers: their pod template judged as the pods they will create.

`kubectl apply --dry-run=server` of a Deployment reaches pod webhooks only when the controller
later creates pods, so judging the template is what gives feedback at apply time.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.containers import mapping
from policies.errors import InputError
from policies.judge.quota import UsageSource, dimensions, scope_label, scope_of
from policies.judge.usage import Usage
from policies.judge.verdict import Verdict
from policies.model.policy import Action, GPUPolicy
from policies.mutate.document import JSON

# kind -> path of the pod template, path of the replica count
CONTROLLERS: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "Deployment": (("spec", "template"), ("spec", "replicas")),
    "StatefulSet": (("spec", "template"), ("spec", "replicas")),
    "ReplicaSet": (("spec", "template"), ("spec", "replicas")),
    "DaemonSet": (("spec", "template"), None),
    "Job": (("spec", "template"), ("spec", "parallelism")),
    "CronJob": (("spec", "jobTemplate", "spec", "template"), ("spec", "jobTemplate", "spec", "parallelism")),
}


@dataclass(frozen=True, slots=True)
class Template:
    pod: JSON
    replicas: int
    path: str


def _walk(raw: JSON, path: tuple[str, ...]) -> JSON:
    for key in path:
        if not isinstance(raw, dict):
            return None
        raw = raw.get(key)
    return raw


def pod_template(raw: JSON, namespace: str = "") -> Template:
    """The pod a controller will create, as a v1 Pod in the controller's namespace (`namespace`:
    the request's, which the API server sets; the template's own namespace is never used, since
    the controller creates its pods where it lives)."""
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in CONTROLLERS:
        raise InputError("kind", f"expected a pod controller ({', '.join(sorted(CONTROLLERS))}), got {kind!r}")
    template_path, replicas_path = CONTROLLERS[kind]
    dotted = ".".join(template_path)
    template = _walk(raw, template_path)
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise InputError(dotted, f"a {kind} needs a pod template with a spec")
    metadata = dict(mapping(template.get("metadata"), f"{dotted}.metadata"))
    controller_meta = mapping(raw.get("metadata"), "metadata")
    metadata["namespace"] = namespace or str(controller_meta.get("namespace") or "")
    metadata.setdefault("name", str(controller_meta.get("name") or ""))
    replicas = _walk(raw, replicas_path) if replicas_path else 1
    if replicas is None:
        replicas = 1
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise InputError(".".join(replicas_path or ()), "must be a whole number")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
    return Template(pod, replicas, dotted)


def replica_warnings(
    policies: tuple[GPUPolicy, ...], namespace: str, usage: Usage, replicas: int, usage_source: UsageSource
) -> list[Verdict]:
    """Where `replicas` pods of this template would exceed a quota, say so with the numbers."""
    verdicts: list[Verdict] = []
    if replicas <= 1 or usage.empty:
        return verdicts
    for policy in policies:
        quota = policy.quota
        if quota is None:
            continue
        scope = scope_of(quota, namespace)
        label = scope_label(policy, quota, namespace)
        current = usage_source.usage(policy, scope)
        held = {name: amount for name, _, amount, _ in dimensions(quota.limits, current, quota.shared_weight)}
        for name, path, asked, limit in dimensions(quota.limits, usage, quota.shared_weight):
            total = held[name] + asked * replicas
            if asked > 0 and total > limit:
                verdicts.append(
                    Verdict(
                        policy.name,
                        f"quota.{name.split()[0]}",
                        f"spec.quota.limits.{path}",
                        f"{label}: {replicas} replicas would hold {name} {held[name]} + {replicas}x{asked} = "
                        f"{total}, over {limit} (policy {policy.name})",
                        Action.WARN,
                    )
                )
    return verdicts
