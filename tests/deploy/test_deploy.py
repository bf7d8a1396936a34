"""The manifests: every overlay renders, every object fits the kubernetes client's models, and the
webhook configurations keep the rules the API server's good practices ask for."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import policies.bundled
from policies.model.cel import CelInput, compile_expression
from policies.native.workload_conditions import custom_kinds
from tests.support.builders import gpu_container, plain_container, pod
from tests.support.deploy import API, MODELS

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = [
    "deploy/base",
    "deploy/overlays/cert-manager",
    "deploy/overlays/namespaced-policies",
    "deploy/overlays/policyreport-crds",
    "deploy/overlays/dra",
]
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
CRDS = {"Certificate", "Issuer"}
EXCLUDED = {
    "kube-system",
    "kube-node-lease",
    "gpu-operator",
    "nvidia-gpu-operator",
    "nvidia-dra-driver-gpu",
    "nvidia-device-plugin",
    "gpu-admission",
}


def render(overlay: str) -> list[dict]:
    done = subprocess.run([KUBECTL, "kustomize", str(ROOT / overlay)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_round_trips_through_its_kubernetes_model(overlay):
    for obj in render(overlay):
        if obj["kind"] in CRDS:
            continue
        model = API._ApiClient__deserialize(obj, MODELS[obj["kind"]])  # type: ignore[attr-defined]
        assert API.sanitize_for_serialization(model) == obj, obj["kind"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_webhook_configurations_follow_the_api_servers_rules(overlay):
    objects = render(overlay)
    mutating = by_kind(objects, "MutatingWebhookConfiguration")[0]["webhooks"]
    validating = by_kind(objects, "ValidatingWebhookConfiguration")[0]["webhooks"]
    for hook in mutating + validating:
        # Only validating pods writes (a strict quota's Lease), and never on a dry run.
        writes = hook["name"] == "validate-pods.gpu-admission.io"
        assert hook["sideEffects"] == ("NoneOnDryRun" if writes else "None")
        assert hook["admissionReviewVersions"] == ["v1"]
        assert 1 <= hook["timeoutSeconds"] <= 5
        (expression,) = hook["namespaceSelector"]["matchExpressions"]
        assert expression["key"] == "kubernetes.io/metadata.name" and expression["operator"] == "NotIn"
        policies_hook = hook["name"].startswith("validate-policies")
        assert set(expression["values"]) == (EXCLUDED - {"gpu-admission"} if policies_hook else EXCLUDED)
    assert all(h["reinvocationPolicy"] == "IfNeeded" for h in mutating)
    resources = {r for h in validating for rule in h["rules"] for r in rule["resources"]}
    assert resources == {
        "pods",
        "pods/ephemeralcontainers",
        "pods/resize",
        "deployments",
        "statefulsets",
        "daemonsets",
        "replicasets",
        "jobs",
        "cronjobs",
        "configmaps",
        "secrets",
        "resourceclaims",
        "resourceclaimtemplates",
        "namespaces",
        # a scale-up, judged by the workload's templates
        "deployments/scale",
        "statefulsets/scale",
        "replicasets/scale",
        "leaderworkersets/scale",
        # policies as objects: the same verdict as a policy ConfigMap's
        "gpupolicies",
    } | {kind.resource for kind in custom_kinds()}
    (scale,) = [h for h in validating if h["name"].startswith("validate-scale")]
    assert all(rule["operations"] == ["UPDATE"] for rule in scale["rules"]) and scale["failurePolicy"] == "Ignore"
    # DRA claims and templates are judged at their own creation, by every API version served.
    (claims,) = [h for h in validating if "resourceclaims" in h["rules"][0]["resources"]]
    assert claims["rules"][0]["apiGroups"] == ["resource.k8s.io"] and claims["rules"][0]["apiVersions"] == ["*"]
    assert claims["failurePolicy"] == "Fail" and claims["matchPolicy"] == "Equivalent"
    (policies_hook,) = [h for h in validating if h["name"].startswith("validate-policies")]
    assert policies_hook["objectSelector"] == {"matchLabels": {"gpu-admission.io/policy": "true"}}
    # GPUPolicy objects: every one (no label asked), never their status (the webhook writes it).
    (gpupolicies,) = [h for h in validating if h["name"].startswith("validate-gpupolicies")]
    assert gpupolicies["rules"][0]["resources"] == ["gpupolicies"] and "objectSelector" not in gpupolicies
    # ConfigMaps and Secrets are sent only with a key named NVIDIA_VISIBLE_DEVICES & co.
    (env_sources,) = [h for h in validating if "secrets" in h["rules"][0]["resources"]]
    (condition,) = env_sources["matchConditions"]
    assert "object.data" in condition["expression"] and "objectSelector" not in env_sources


def pod_hooks(objects: list[dict]) -> list[dict]:
    hooks = by_kind(objects, "MutatingWebhookConfiguration")[0]["webhooks"]
    return hooks + [
        h
        for h in by_kind(objects, "ValidatingWebhookConfiguration")[0]["webhooks"]
        if "matchConditions" in h and "pods" in h["rules"][0]["resources"]
    ]


def reaches_webhook(hook: dict, obj: dict, user: dict) -> bool:
    conditions = [compile_expression(c["expression"]) for c in hook["matchConditions"]]
    data = CelInput({"object": obj, "oldObject": None, "request": {"userInfo": user}})  # a CREATE
    return all(c.evaluate_bool(data) for c in conditions)


USER = {"username": "alice", "groups": ["dev"]}
KUBELET = {"username": "system:node:gpu-1", "groups": ["system:nodes"]}
ENV_ALL = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
CONDITION_CASES = [
    ("gpu-pod", pod(gpu_container(gpus="1")), USER, True),
    ("ordinary-pod", pod(plain_container()), USER, False),
    ("gpu-init-container", pod(plain_container(), init=(gpu_container("warm", gpus="1"),)), USER, True),
    ("triton", pod(plain_container(), annotations={"triton": "inject"}), USER, True),
    (
        "mirror-pod-from-a-kubelet",
        pod(gpu_container(gpus="1"), annotations={"kubernetes.io/config.mirror": "x"}),
        KUBELET,
        False,
    ),
    (
        "mirror-annotation-from-a-user",
        pod(gpu_container(gpus="1"), annotations={"kubernetes.io/config.mirror": "x"}),
        USER,
        True,
    ),
    ("device-env", pod(dict(plain_container(), env=ENV_ALL)), USER, True),
    (
        "device-env-in-an-init-container",
        pod(plain_container(), init=(dict(plain_container("i"), env=ENV_ALL),)),
        USER,
        True,
    ),
    ("nvidia-runtime-class", pod(plain_container(), runtimeClassName="nvidia-cdi"), USER, True),
    (
        "device-hostpath",
        pod(plain_container(), volumes=[{"name": "d", "hostPath": {"path": "/dev/nvidiactl"}}]),
        USER,
        True,
    ),
    ("log-hostpath", pod(plain_container(), volumes=[{"name": "d", "hostPath": {"path": "/var/log"}}]), USER, False),
    ("cdi-annotation", pod(plain_container(), annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}), USER, True),
    (
        "other-env",
        pod(dict(plain_container(), env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}])),
        USER,
        False,
    ),
]


@pytest.mark.parametrize("obj, user, expected", [c[1:] for c in CONDITION_CASES], ids=[c[0] for c in CONDITION_CASES])
def test_match_conditions_let_only_pods_that_can_reach_a_gpu_reach_the_webhook(obj, user, expected):
    hooks = pod_hooks(render("deploy/base"))
    assert len(hooks) == 2
    for hook in hooks:
        assert reaches_webhook(hook, obj, user) is expected


def test_the_deployment_is_hardened_and_highly_available():
    objects = render("deploy/base")
    deployment = by_kind(objects, "Deployment")[0]
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 3
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert spec["priorityClassName"] == by_kind(objects, "PriorityClass")[0]["metadata"]["name"]
    (container,) = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "cpu" in container["resources"]["requests"] and "cpu" not in container["resources"].get("limits", {})
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert by_kind(objects, "PodDisruptionBudget")[0]["spec"]["minAvailable"] == 2


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rbac_is_least_privilege(overlay):
    """Writes are pinned to the webhook's own objects by name, except: Events, the load-errors
    annotation on policy ConfigMaps (patch only), GPUPolicy status (patch only), strict quota
    Leases (in its namespace only, named per quota as quotas appear), the audit's PolicyReports
    and the DRA claim back-end's ResourceClaimTemplates (create only: never changed or deleted). Nothing is deleted but
    expired strict quota Leases of its own namespace; pods are only read, and workloads only got
    one by one (a scale-up's templates), never listed."""
    objects = render(overlay)
    for role in by_kind(objects, "Role") + by_kind(objects, "ClusterRole"):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"]
            assert "deletecollection" not in rule["verbs"]
            if "delete" in rule["verbs"]:
                assert role["kind"] == "Role" and rule["resources"] == ["leases"], rule
            writes = set(rule["verbs"]) & {"create", "update", "patch"}
            if writes and not rule.get("resourceNames"):
                assert rule["resources"] in (
                    ["events"],
                    ["configmaps"],
                    ["leases"],
                    ["policyreports", "clusterpolicyreports"],
                    ["resourceclaimtemplates"],
                    ["gpupolicies/status"],
                ), rule
                if rule["resources"] == ["gpupolicies/status"]:
                    assert rule["apiGroups"] == ["gpu-admission.io"] and writes == {"patch"}
                if rule["resources"] == ["resourceclaimtemplates"]:
                    assert rule["apiGroups"] == ["resource.k8s.io"] and set(rule["verbs"]) == {"create"}
                if "policyreports" in rule["resources"]:
                    assert rule["apiGroups"] == ["wgpolicyk8s.io"] and writes == {"create", "update"}
                if rule["resources"] == ["configmaps"]:
                    assert writes == {"patch"}
                if rule["resources"] == ["leases"]:
                    assert role["kind"] == "Role"
            if "pods" in rule["resources"]:
                assert set(rule["verbs"]) <= {"get", "list", "watch"}
            if {"deployments", "leaderworkersets"} & set(rule["resources"]):
                assert rule["verbs"] == ["get"], rule
            if "secrets" in rule["resources"]:
                assert rule.get("resourceNames")


def test_tenants_may_read_their_policyreports_and_the_policies_and_nothing_more():
    """#41: no role let view or edit read PolicyReports, and `quota -n ml` as a tenant could not
    read the policies it judges with. Read-only, aggregated into Kubernetes' own roles, the
    policy ConfigMaps of the webhook's namespace only."""
    objects = render("deploy/base")
    (view,) = [r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"] == "gpu-admission-view"]
    labels = view["metadata"]["labels"]
    assert all(labels[f"rbac.authorization.k8s.io/aggregate-to-{role}"] == "true" for role in ("view", "edit", "admin"))
    assert view["rules"] == [
        {"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports"], "verbs": ["get", "list", "watch"]}
    ]
    (reader,) = [r for r in by_kind(objects, "Role") if r["metadata"]["name"] == "gpu-admission-policy-reader"]
    assert reader["metadata"]["namespace"] == "gpu-admission"
    assert reader["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    (binding,) = [b for b in by_kind(objects, "RoleBinding") if b["roleRef"]["name"] == "gpu-admission-policy-reader"]
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
    ]


def test_the_namespaced_policies_overlay_reads_configmaps_only_where_a_rolebinding_opens_a_namespace():
    objects = render("deploy/overlays/namespaced-policies")
    env = by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "GPU_ADMISSION_LABELLED_NAMESPACES", "value": "true"} in env
    assert "GPU_ADMISSION_ALL_NAMESPACES" not in {e["name"] for e in env}
    (role,) = [
        r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"] == "gpu-admission-namespaced-policies"
    ]
    assert any(r["resources"] == ["configmaps"] and "watch" in r["verbs"] for r in role["rules"])
    bound = [b["roleRef"]["name"] for b in by_kind(objects, "ClusterRoleBinding")]
    assert "gpu-admission-namespaced-policies" not in bound  # granted per namespace, never cluster-wide
    for binding in by_kind(objects, "ClusterRoleBinding"):
        (cluster_role,) = [
            r for r in by_kind(objects, "ClusterRole") if r["metadata"]["name"] == binding["roleRef"]["name"]
        ]
        for rule in cluster_role["rules"]:
            assert "configmaps" not in rule["resources"] or not set(rule["verbs"]) & {"list", "watch"}, rule
    example = yaml.safe_load((ROOT / "deploy/overlays/namespaced-policies/rolebinding-example.yaml").read_text())
    assert example["roleRef"]["name"] == "gpu-admission-namespaced-policies"


def env_of(objects: list[dict]) -> dict[str, str]:
    container = by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_the_base_manages_its_own_certificates_in_secrets_it_may_only_update():
    objects = render("deploy/base")
    assert env_of(objects)["GPU_ADMISSION_MANAGE_CERTS"] == "true"
    secrets = {s["metadata"]["name"]: s for s in by_kind(objects, "Secret")}
    assert set(secrets) == {"gpu-admission-ca", "gpu-admission-tls"} and not any(
        s.get("data") for s in secrets.values()
    )
    volumes = by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["volumes"]
    assert next(v for v in volumes if v["name"] == "certs")["emptyDir"]["medium"] == "Memory"
    (role,) = [r for r in by_kind(objects, "Role") if r["metadata"]["name"] == "gpu-admission"]
    (secret_rule,) = [r for r in role["rules"] if r["resources"] == ["secrets"]]
    assert set(secret_rule["resourceNames"]) == set(secrets) and "create" not in secret_rule["verbs"]
    lease_rules = [r for r in role["rules"] if r["resources"] == ["leases"]]
    assert any("gpu-admission-certs" in r.get("resourceNames", []) and "update" in r["verbs"] for r in lease_rules)


def test_the_cert_manager_overlay_serves_what_cert_manager_issues_and_manages_nothing_itself():
    objects = render("deploy/overlays/cert-manager")
    assert env_of(objects)["GPU_ADMISSION_MANAGE_CERTS"] == "false"
    assert not by_kind(objects, "Secret")
    volumes = by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["volumes"]
    assert next(v for v in volumes if v["name"] == "certs")["secret"]["secretName"] == "gpu-admission-tls"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = by_kind(objects, kind)[0]["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == "gpu-admission/gpu-admission-tls"


def test_the_policy_configmap_ships_the_packages_own_bundled_policies():
    configmap = by_kind(render("deploy/base"), "ConfigMap")[0]
    assert configmap["metadata"]["labels"]["gpu-admission.io/policy"] == "true"
    bundled = (Path(policies.bundled.__file__).parent / "default.yaml").read_text()
    assert configmap["data"]["default.yaml"] == bundled


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_network_policy_admits_the_webhooks_port_and_metrics_from_the_monitoring_namespace_only(overlay):
    objects = render(overlay)
    (policy,) = by_kind(objects, "NetworkPolicy")
    deployment = by_kind(objects, "Deployment")[0]
    assert (
        policy["spec"]["podSelector"]["matchLabels"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    webhook, metrics = policy["spec"]["ingress"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert webhook["ports"] == [{"port": ports["https"], "protocol": "TCP"}]
    assert metrics["ports"] == [{"port": ports["metrics"], "protocol": "TCP"}]
    assert metrics["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GPU_ADMISSION_METRICS_BIND"] == f"0.0.0.0:{ports['metrics']}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_liveness_waits_for_a_startup_probe_longer_than_the_first_certificate_wait(overlay):
    (deployment,) = by_kind(render(overlay), "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] > 120  # certificates: up to 120 s
    assert container["resources"]["requests"]["cpu"] == "1" and "cpu" not in container["resources"]["limits"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_passes_kubernetes_validate_strict(overlay):
    import kubernetes_validate

    version = kubernetes_validate.latest_version()
    for obj in render(overlay):
        if obj["kind"] in CRDS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)
