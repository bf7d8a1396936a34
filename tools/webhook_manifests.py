"""The webhook configurations, written once: `deploy/base/webhooks.yaml` (kustomize) and the chart's
`templates/webhooks.yaml` (Helm) are both rendered from here, and a test holds the checked-in files
to this output (`python -m tools.webhook_manifests` rewrites them).

Every matchCondition is small and linear in the object it reads: the pod one, the same over a
controller's template, and one per workload kind of the table in policies/model/workloads.py (each
its own webhook, matching its own resource only, so no expression dispatches on the kind and none
nears CEL's limits: `MAX_EXPRESSION` holds each under 8 KB).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from policies.native.reach import (
    ANY_EXTENDED,
    DEVICE_ENV,
    EXCLUDED,
    MIRROR_PODS,
    NAMESPACE,
    or_shared_before,
    pod_condition,
)
from tools.policy_schema.workload_conditions import custom_kinds, kind_condition

ROOT = Path(__file__).resolve().parent.parent
KUSTOMIZE = ROOT / "deploy" / "base" / "webhooks.yaml"
HELM = ROOT / "charts" / "gpu-admission" / "templates" / "webhooks.yaml"
MAX_EXPRESSION = 8 * 1024
# A ConfigMap's or Secret's keys that envFrom would hand over as those variables: a map lookup each.
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


@dataclass(frozen=True)
class Target:
    """What differs between kustomize's plain YAML and Helm's template."""

    helm: bool

    def header(self, kind: str) -> list[str]:
        lines = ["apiVersion: admissionregistration.k8s.io/v1", f"kind: {kind}", "metadata:", "  name: gpu-admission"]
        if self.helm:
            lines += [
                "  labels:",
                '    {{- include "gpu-admission.labels" . | nindent 4 }}',
                '  {{- if eq .Values.certificates.mode "cert-manager" }}',
                "  annotations: {cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/gpu-admission-tls}",
                "  {{- end }}",
            ]
        return [*lines, "webhooks:"]

    def failure_policy(self) -> str:
        return "{{ .Values.failurePolicy }}" if self.helm else "Fail"

    def client_config(self, path: str) -> list[str]:
        if self.helm:
            return [
                f'      {{{{- include "gpu-admission.clientConfig" (dict "root" $ "path" "{path}") | nindent 6 }}}}'
            ]
        return [f"      service: {{name: gpu-admission, namespace: {NAMESPACE}, path: {path}, port: 443}}"]

    def excluded(self, own: bool = True) -> str:
        if self.helm:
            return '{{ include "gpu-admission.excluded" . }}' if own else '[{{ join ", " .Values.excludedNamespaces }}]'
        return f"[{', '.join(EXCLUDED + ([NAMESPACE] if own else []))}]"


def _webhook(
    target: Target,
    name: str,
    path: str,
    rules: list[str],
    *,
    failure: str = "Ignore",
    side_effects: str = "None",
    reinvoke: bool = False,
    own_namespace_excluded: bool = True,
    selector: Sequence[str] = (),
    conditions: Sequence[tuple[str, list[str]]] = (),
    comment: Sequence[str] = (),
) -> list[str]:
    lines = [f"  # {line}" if line else "  #" for line in comment]
    lines += [
        f"  - name: {name}",
        "    admissionReviewVersions: [v1]",
        f"    sideEffects: {side_effects}",
        f"    failurePolicy: {failure}",
    ]
    if reinvoke:
        lines.append("    reinvocationPolicy: IfNeeded")
    lines += ["    timeoutSeconds: 3", "    matchPolicy: Equivalent", "    clientConfig:", *target.client_config(path)]
    lines += [
        "    rules:",
        *(f"      {rule}" if rule.startswith("#") else f"      - {rule}" for rule in rules),
        *selector,
    ]
    lines += [
        "    namespaceSelector:",
        "      matchExpressions:",
        "        - {key: kubernetes.io/metadata.name, operator: NotIn, values: "
        f"{target.excluded(own_namespace_excluded)}}}",
    ]
    if conditions:
        lines.append("    matchConditions:")
        for condition, expression in conditions:
            lines += [f"      - name: {condition}", "        expression: >-", *(f"          {e}" for e in expression)]
    return lines


POD_COMMENT = [
    "Every pod that could reach a GPU, so an outage never blocks ordinary pods: one asking for an",
    "nvidia.com/ resource (init containers too), running under an NVIDIA RuntimeClass, setting",
    "NVIDIA_VISIBLE_DEVICES & co. in any container (ephemeral ones too: the NVIDIA runtime may be",
    "the node's default) or taking envFrom under a prefix of those names, mounting a hostPath that",
    "may lead to the node's devices (any path with dev, nvidia, a dot or a double slash in it, or /),",
    "naming CDI devices, holding DRA claims (what they allocate is looked up), or asking for Triton.",
    "Kubelets' mirror pods are skipped; the annotation alone is anyone's to write.",
]
EXTENDED_COMMENT = [
    "Validation also sees pods asking for any extended resource (a name with a domain): a DRA",
    "DeviceClass may serve any name, and only the cluster's classes say whether it is a GPU.",
]
POD_RULE = '{apiGroups: [""], apiVersions: [v1], operations: [%s], resources: [%s], scope: Namespaced}'


def mutating(target: Target) -> list[str]:
    return target.header("MutatingWebhookConfiguration") + _webhook(
        target,
        "mutate.gpu-admission.io",
        "/mutate",
        [POD_RULE % ("CREATE", "pods")],
        failure=target.failure_policy(),
        reinvoke=True,
        conditions=[("pods-that-can-reach-a-gpu", pod_condition("object")), ("not-kubelet-mirror-pods", MIRROR_PODS)],
        comment=POD_COMMENT,
    )


def validating(target: Target) -> list[str]:
    lines = target.header("ValidatingWebhookConfiguration")
    lines += _webhook(
        target,
        "validate-pods.gpu-admission.io",
        "/validate",
        [
            "# pods/ephemeralcontainers: a debug container is judged for its device access like any other;",
            "# pods/resize: a pod's CPU and memory resized in place, judged as it is left (rules, caps).",
            POD_RULE % ("CREATE, UPDATE", "pods, pods/ephemeralcontainers, pods/resize"),
        ],
        failure=target.failure_policy(),
        side_effects="NoneOnDryRun  # strict quotas write a Lease per admission, never on a dry run",
        conditions=[
            ("pods-that-can-reach-a-gpu", or_shared_before(pod_condition("object", asks=ANY_EXTENDED))),
            ("not-kubelet-mirror-pods", MIRROR_PODS),
        ],
        comment=[*POD_COMMENT, *EXTENDED_COMMENT],
    )
    controllers = (
        (
            "validate-controllers.gpu-admission.io",
            "object.spec.template",
            "apps",
            "deployments, statefulsets, daemonsets, replicasets",
        ),
        ("validate-jobs.gpu-admission.io", "object.spec.template", "batch", "jobs"),
        ("validate-cronjobs.gpu-admission.io", "object.spec.jobTemplate.spec.template", "batch", "cronjobs"),
    )
    for index, (name, template, group, resources) in enumerate(controllers):
        comment = (
            [
                "Controllers: their pod templates are judged so `kubectl apply --dry-run=server` gives",
                "feedback; only templates that could reach a GPU (the pod condition, on the template).",
            ]
            if index == 0
            else []
        )
        rule = (
            f"{{apiGroups: [{group}], apiVersions: [v1], operations: [CREATE, UPDATE], "
            f"resources: [{resources}], scope: Namespaced}}"
        )
        lines += _webhook(
            target,
            name,
            "/validate",
            [rule],
            conditions=[("templates-that-can-reach-a-gpu", pod_condition(template, template=True, asks=ANY_EXTENDED))],
            comment=comment,
        )
    for index, entry in enumerate(custom_kinds()):
        comment = (
            [
                "Workloads of the table in policies/model/workloads.py (Kubeflow, Ray, LeaderWorkerSet, JobSet,",
                "Argo, KServe, Knative): their pod templates are judged as the pods they will make. One",
                "webhook per kind, its condition generated from the table: objects whose templates ask for",
                "no GPU stay out, and no expression reads another kind's fields.",
            ]
            if index == 0
            else []
        )
        rule = (
            f"{{apiGroups: [{entry.group}], apiVersions: ['*'], operations: [CREATE, UPDATE], "
            f"resources: [{entry.resource}], scope: {'Cluster' if entry.cluster_scoped else 'Namespaced'}}}"
        )
        lines += _webhook(
            target,
            f"{entry.resource}.{entry.group}.workloads.gpu-admission.io",
            "/validate",
            [rule],
            conditions=[("templates-that-ask-for-a-gpu", [kind_condition(entry)])],
            comment=comment,
        )
    lines += _webhook(
        target,
        "validate-scale.gpu-admission.io",
        "/validate",
        [
            "{apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], "
            "resources: [deployments/scale, statefulsets/scale, replicasets/scale], scope: Namespaced}",
            "{apiGroups: [leaderworkerset.x-k8s.io], apiVersions: ['*'], operations: [UPDATE], "
            "resources: [leaderworkersets/scale], scope: Namespaced}",
        ],
        conditions=[("scale-ups", [SCALE_UP])],
        comment=[
            "Scale subresources (`kubectl scale`, autoscalers): a scale-up is judged by the workload's",
            "templates for the pods it adds, the budgets at the policy's action. Only scale-ups are",
            "sent; Ignore, since the pods it adds are still judged one by one as they are made.",
        ],
    )
    lines += _webhook(
        target,
        "validate-claims.gpu-admission.io",
        "/validate",
        [
            "{apiGroups: [resource.k8s.io], apiVersions: ['*'], operations: [CREATE, UPDATE], "
            "resources: [resourceclaims, resourceclaimtemplates], scope: Namespaced}"
        ],
        failure=target.failure_policy(),
        comment=[
            "DRA ResourceClaims and ResourceClaimTemplates, judged at their own creation by the policies",
            "that hold for every pod of their namespace: profiles, models, multi-GPU, adminAccess, device",
            "taints, opaque configuration, allowed classes, per-pod caps (docs/dra.md).",
        ],
    )
    lines += _webhook(
        target,
        "validate-admin-access.gpu-admission.io",
        "/validate",
        [POD_RULE.replace("Namespaced", "Cluster") % ("CREATE, UPDATE", "namespaces")],
        failure=target.failure_policy(),
        conditions=[("labelled-for-admin-access", [ADMIN_ACCESS_LABELLED])],
        comment=[
            "Namespaces labelled resource.kubernetes.io/admin-access=true, all Kubernetes asks before it",
            "stores DRA claims with adminAccess (devices allocated to others): refused unless a policy",
            "allows draAdminAccess. Only such namespaces are sent.",
        ],
    )
    lines += _webhook(
        target,
        "validate-env-sources.gpu-admission.io",
        "/validate",
        [POD_RULE % ("CREATE, UPDATE", "configmaps, secrets")],
        failure=target.failure_policy(),
        conditions=[("keys-that-name-nvidia-devices", [NAMED_DEVICE_KEYS])],
        comment=[
            "ConfigMaps and Secrets with a key named NVIDIA_VISIBLE_DEVICES & co.: an envFrom without a",
            "prefix, in any pod, would hand their value to the NVIDIA runtime. Only those are sent",
            "(a map lookup per name, whatever the object's size); their values never leave the webhook.",
        ],
    )
    lines += _webhook(
        target,
        "validate-policies.gpu-admission.io",
        "/validate",
        [POD_RULE % ("CREATE, UPDATE", "configmaps")],
        own_namespace_excluded=False,
        selector=["    objectSelector:", '      matchLabels: {gpu-admission.io/policy: "true"}'],
        comment=[
            "Policy ConfigMaps: a broken policy is refused at `kubectl apply` (and --dry-run=server) with",
            "its lint errors. Its own namespace is included: that is where policies live.",
        ],
    )
    lines += _webhook(
        target,
        "validate-gpupolicies.gpu-admission.io",
        "/validate",
        [
            "{apiGroups: [gpu-admission.io], apiVersions: ['*'], operations: [CREATE, UPDATE], "
            "resources: [gpupolicies], scope: Cluster}"
        ],
        comment=[
            "GPUPolicy objects: the same verdict as a policy ConfigMap's, after the API server's own",
            "schema check. Ignore, as for ConfigMaps: a policy shipped with the webhook still applies, and",
            "one that got in broken says so on its status and keeps its last good version (or fails closed).",
        ],
    )
    return lines


def render(helm: bool) -> str:
    target = Target(helm)
    head = "# Generated by tools/webhook_manifests.py from one description (python -m tools.webhook_manifests).\n"
    if helm:
        head = "{{- /* " + head.strip().lstrip("# ") + " */}}\n"
    return head + "\n".join([*mutating(target), "---", *validating(target)]) + "\n"


EXTERNAL = ROOT / "deploy" / "components" / "external-webhook" / "kustomization.yaml"
HOST = "WEBHOOK_HOST"  # replaced by the host of the ConfigMap gpu-admission-webhook-url


def external_component(rendered: str) -> str:
    """The kustomize component for a webhook served outside the cluster (Helm's `webhookURL`):
    every webhook's clientConfig a url on the host a ConfigMap of the user's overlay names (kept
    out of the output: local-config), its path the one the Service would have had."""
    import yaml

    patches = []
    for configuration in (d for d in yaml.safe_load_all(rendered) if d):
        operations = [
            {
                "op": "replace",
                "path": f"/webhooks/{index}/clientConfig",
                "value": {"url": f"https://{HOST}{hook['clientConfig']['service']['path']}"},
            }
            for index, hook in enumerate(configuration["webhooks"])
        ]
        target = {"kind": configuration["kind"], "name": configuration["metadata"]["name"]}
        patches.append({"target": target, "patch": yaml.safe_dump(operations, width=200)})
    component = {
        "apiVersion": "kustomize.config.k8s.io/v1alpha1",
        "kind": "Component",
        "patches": patches,
        "replacements": [
            {
                "source": {"kind": "ConfigMap", "name": "gpu-admission-webhook-url", "fieldPath": "data.host"},
                "targets": [
                    {
                        "select": {"kind": kind},
                        "fieldPaths": ["webhooks.*.clientConfig.url"],
                        "options": {"delimiter": "/", "index": 2},
                    }
                    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
                ],
            }
        ],
    }
    usage = (
        "# Generated by tools/webhook_manifests.py. A webhook served outside the cluster (Helm: webhookURL):\n"
        "# every webhook configuration calls https://HOST/<its path> instead of the Service. In your overlay:\n"
        "#   resources: [<path to>/deploy/base, webhook-url.yaml]   # the ConfigMap below, with your host\n"
        "#   components: [<path to>/deploy/components/external-webhook]\n"
        "# webhook-url.yaml (never applied: local-config):\n"
        "#   apiVersion: v1\n#   kind: ConfigMap\n#   metadata:\n#     name: gpu-admission-webhook-url\n"
        '#     annotations: {config.kubernetes.io/local-config: "true"}\n'
        "#   data: {host: gpu-admission.example.com:8443}\n"
        "# deploy/overlays/external-webhook is that overlay. The server's certificate must name the host,\n"
        "# and the CA reach each configuration's caBundle (the webhook injects its own when it can).\n"
    )
    return usage + yaml.safe_dump(component, sort_keys=False, width=200)


def outputs() -> dict[Path, str]:
    kustomize = render(helm=False)
    return {KUSTOMIZE: kustomize, HELM: render(helm=True), EXTERNAL: external_component(kustomize)}


def main() -> int:
    for path, text in outputs().items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
