"""charts/gpu-admission with Helm's own Go library (helm-python-sdk): lint, render, every object
checked by kubernetes-validate --strict and the kubernetes client's models, and the defaults
(and the overlays' values) rendering exactly what kustomize renders of deploy/."""

import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.support.deploy import API, MODELS

helm = pytest.importorskip("helm_python")
ROOT = Path(__file__).parents[2]
CHART = ROOT / "charts" / "gpu-admission"
KUBECTL = shutil.which("kubectl")
K8S = kubernetes_validate.latest_version()
CERT_MANAGER_KINDS = {"Certificate", "Issuer"}


def rendered_files(**values) -> dict[str, str]:
    chart = helm.Chart.load(str(CHART))
    return chart.render(values or None, name="gpu-admission", namespace="gpu-admission", is_install=True)


def render(**values) -> list[dict]:
    manifests = rendered_files(**values)
    return [
        d
        for name, text in sorted(manifests.items())
        if not name.endswith("NOTES.txt")
        for d in yaml.safe_load_all(text)
        if d
    ]


def kustomize(overlay: str) -> list[dict]:
    done = subprocess.run([KUBECTL, "kustomize", str(ROOT / overlay)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


HELM_LABELS = (
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
)


def normal(node):
    """What two renderings may differ in without meaning anything: env order (a strategic merge
    patch puts a patched variable first), the whitespace of CEL expressions (kustomize re-folds
    block scalars), and the labels only Helm knows (which release, which chart)."""
    if isinstance(node, dict):
        out = {k: normal(v) for k, v in node.items()}
        if isinstance(out.get("labels"), dict):
            out["labels"] = {k: v for k, v in out["labels"].items() if k not in HELM_LABELS}
        if isinstance(out.get("expression"), str):
            out["expression"] = " ".join(out["expression"].split())
        if isinstance(out.get("env"), list):
            out["env"] = sorted(out["env"], key=lambda e: e["name"])
        return out
    if isinstance(node, list):
        return [normal(v) for v in node]
    return node


def keyed(objects) -> dict[tuple[str, str], dict]:
    return {(o["kind"], o["metadata"]["name"]): normal(o) for o in objects}


def test_helm_lints_the_chart_clean():
    report = helm.lint(str(CHART), strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.parametrize(
    "overlay, values",
    [
        pytest.param("deploy/overlays/dra", {}, id="defaults"),
        pytest.param("deploy/base", {"dra": {"migDeviceClasses": False}}, id="without-device-classes"),
        pytest.param(
            "deploy/overlays/cert-manager",
            {"certificates": {"mode": "cert-manager"}, "dra": {"migDeviceClasses": False}},
            id="cert-manager",
        ),
        pytest.param(
            "deploy/overlays/namespaced-policies",
            {"policies": {"namespaced": True}, "dra": {"migDeviceClasses": False}},
            id="namespaced",
        ),
        pytest.param(
            "deploy/overlays/monitoring",
            {
                "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
                "dra": {"migDeviceClasses": False},
            },
            id="monitoring",
        ),
    ],
)
def test_the_chart_renders_what_kustomize_renders(overlay, values):
    expected = keyed(o for o in kustomize(overlay) if o["kind"] not in ("Namespace", "CustomResourceDefinition"))
    rendered = keyed(o for o in render(**values) if o["kind"] != "CustomResourceDefinition")
    assert sorted(rendered) == sorted(expected)
    for key, obj in expected.items():
        assert rendered[key] == obj, key


def test_the_chart_ships_the_crds_and_the_default_policies_of_the_repository():
    crds = (ROOT / "deploy/components/policyreport-crds/policyreport-crds.yaml").read_text()
    assert (CHART / "files/policyreport-crds.yaml").read_text() == crds
    assert (CHART / "files/default.yaml").read_text() == (ROOT / "policies/bundled/default.yaml").read_text()
    assert helm.Chart.load(str(CHART)).crds == []  # crds/ would be applied whatever the cluster has


def test_the_policyreport_crds_are_rendered_kept_on_uninstall_and_only_when_asked():
    component = [
        d
        for d in yaml.safe_load_all((ROOT / "deploy/components/policyreport-crds/policyreport-crds.yaml").read_text())
        if d
    ]
    rendered = [
        o for o in render() if o["kind"] == "CustomResourceDefinition" and o["spec"]["group"] == "wgpolicyk8s.io"
    ]
    assert [o["metadata"]["name"] for o in rendered] == [c["metadata"]["name"] for c in component]
    for crd, source in zip(rendered, component, strict=True):
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["spec"] == source["spec"]
    without = render(policyReports={"crds": False})
    assert [o["metadata"]["name"] for o in without if o["kind"] == "CustomResourceDefinition"] == [
        "gpupolicies.gpu-admission.io"
    ]


def test_the_gpupolicy_crd_is_the_repositorys_kept_on_uninstall_and_only_when_asked():
    source = yaml.safe_load((ROOT / "deploy/base/gpupolicy-crd.yaml").read_text())
    (crd,) = [
        o for o in render() if o["kind"] == "CustomResourceDefinition" and o["spec"]["group"] == "gpu-admission.io"
    ]
    assert crd["spec"] == source["spec"]
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert crd["metadata"]["labels"]["helm.sh/chart"].startswith("gpu-admission-")
    assert not [o for o in render(gpuPolicies={"crd": False}) if o["metadata"]["name"] == crd["metadata"]["name"]]


def test_deploy_base_leaves_the_policyreport_crds_to_a_component():
    crds = [o for o in kustomize("deploy/base") if o["kind"] == "CustomResourceDefinition"]
    assert [o["metadata"]["name"] for o in crds] == ["gpupolicies.gpu-admission.io"]
    with_crds = [
        o["metadata"]["name"]
        for o in kustomize("deploy/overlays/policyreport-crds")
        if o["kind"] == "CustomResourceDefinition"
    ]
    assert with_crds == [
        "clusterpolicyreports.wgpolicyk8s.io",
        "gpupolicies.gpu-admission.io",
        "policyreports.wgpolicyk8s.io",
    ]


PLATFORM = {
    "image": {"repository": "registry.example/gpu-admission", "tag": "0.1.0", "digest": "sha256:" + "ab" * 32},
    "imagePullSecrets": [{"name": "registry"}],
    "podAnnotations": {"prometheus.io/scrape": "true"},
    "podLabels": {"team": "platform"},
    "nodeSelector": {"node-role.kubernetes.io/infra": ""},
    "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "gpu-admission"}}}
            ]
        }
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "gpu-admission"}},
        }
    ],
    "priorityClass": {"create": False, "name": "system-cluster-critical"},
    "resources": {"requests": {"cpu": "2", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
    "extraEnv": [{"name": "GPU_ADMISSION_THREADS", "value": "64"}],
    "metrics": {"port": 9100},
    "networkPolicy": {"metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "observability"}}}]},
}


VARIANTS = [
    pytest.param({}, id="defaults"),
    pytest.param(PLATFORM, id="platform-team"),
    pytest.param({"replicas": 1}, id="one-replica"),
    pytest.param(
        {
            "certificates": {
                "mode": "cert-manager",
                "certManager": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}},
            }
        },
        id="cert-manager-issuer",
    ),
    pytest.param({"failurePolicy": "Ignore", "excludedNamespaces": ["kube-system", "batch"]}, id="ignore"),
    pytest.param({"policies": {"default": False, "extra": {"team.yaml": "kind: GPUPolicy\n"}}}, id="extra-policies"),
    pytest.param(
        {"clientAuthentication": {"enabled": True}, "networkPolicy": {"from": [{"ipBlock": {"cidr": "10.0.0.0/28"}}]}},
        id="client-auth",
    ),
    pytest.param(
        {
            "audit": {"seconds": 0},
            "createNamespace": True,
            "replicas": 5,
            "image": {"repository": "r.io/g", "tag": "1.2"},
        },
        id="misc",
    ),
]


@pytest.mark.parametrize("values", VARIANTS)
def test_every_rendered_object_is_valid_to_kubernetes(values):
    for obj in render(**values):
        if obj["kind"] in CERT_MANAGER_KINDS:
            continue
        kubernetes_validate.validate(obj, K8S, strict=True)
        model = API._ApiClient__deserialize(obj, MODELS[obj["kind"]])  # type: ignore[attr-defined]
        assert API.sanitize_for_serialization(model) == obj, obj["kind"]


def webhooks(objects, kind):
    return next(o for o in objects if o["kind"] == kind)["webhooks"]


def deployment_env(objects):
    container = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}, container


def test_values_reach_the_objects():
    ignore = render(failurePolicy="Ignore", excludedNamespaces=["kube-system", "batch"])
    pod_hooks = [w for w in webhooks(ignore, "ValidatingWebhookConfiguration") if "pods" in w["rules"][0]["resources"]]
    assert {w["failurePolicy"] for w in pod_hooks} == {"Ignore"}
    assert pod_hooks[0]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "batch",
        "gpu-admission",
    ]
    extra = render(policies={"default": False, "extra": {"team.yaml": "x: 1\n"}})
    configmaps = [o for o in extra if o["kind"] == "ConfigMap"]
    assert [(c["metadata"]["name"], c["data"]) for c in configmaps] == [
        ("gpu-admission-policies", {"team.yaml": "x: 1\n"})
    ]
    auth = render(clientAuthentication={"enabled": True})
    env, container = deployment_env(auth)
    assert env["GPU_ADMISSION_CLIENT_CA"] == "/etc/gpu-admission/client/client-ca.crt"
    assert {"name": "client-ca", "mountPath": "/etc/gpu-admission/client", "readOnly": True} in container[
        "volumeMounts"
    ]
    env, _ = deployment_env(render(audit={"seconds": 0}))
    assert env["GPU_ADMISSION_AUDIT_SECONDS"] == "0"
    namespace = next(o for o in render(createNamespace=True) if o["kind"] == "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_every_field_a_platform_team_sets_reaches_the_pods():
    objects = render(**PLATFORM)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    template = deployment["spec"]["template"]
    pod = template["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.example/gpu-admission@sha256:" + "ab" * 32
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert template["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    assert template["metadata"]["labels"] == {"team": "platform", "app": "gpu-admission"}
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints"):
        assert pod[key] == PLATFORM[key], key
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert not [o for o in objects if o["kind"] == "PriorityClass"]
    assert container["resources"] == PLATFORM["resources"]
    env, _ = deployment_env(objects)
    assert env["GPU_ADMISSION_THREADS"] == "64" and env["GPU_ADMISSION_METRICS_BIND"] == "0.0.0.0:9100"
    policy = next(o for o in objects if o["kind"] == "NetworkPolicy")
    assert policy["spec"]["ingress"][1] == {
        "ports": [{"port": 9100, "protocol": "TCP"}],
        "from": PLATFORM["networkPolicy"]["metricsFrom"],
    }


@pytest.mark.parametrize(
    "replicas, budget",
    [(1, None), (2, 1), (3, 2), (5, 2)],
    ids=["one-replica-no-pdb", "two-keep-one", "three-keep-two", "five-keep-two"],
)
def test_the_disruption_budget_always_lets_a_drain_through(replicas, budget):
    found = [o for o in render(replicas=replicas) if o["kind"] == "PodDisruptionBudget"]
    assert [o["spec"]["minAvailable"] for o in found] == ([budget] if budget else [])


def test_the_notes_say_how_to_watch_the_rollout_and_what_is_left_open():
    notes = next(text for name, text in rendered_files().items() if name.endswith("NOTES.txt"))
    assert "kubectl -n gpu-admission rollout status deploy/gpu-admission" in notes
    assert "networkPolicy.from is empty" in notes
    assert "gpu-operator" in notes
    narrowed = rendered_files(networkPolicy={"from": [{"ipBlock": {"cidr": "10.0.0.0/28"}}]})
    assert "networkPolicy.from is empty" not in next(t for n, t in narrowed.items() if n.endswith("NOTES.txt"))


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"image": {"repository": "r", "tag": "1", "digest": "latest"}}, id="digest-not-a-digest"),
        pytest.param({"metrics": {"port": 8443}}, id="metrics-on-the-webhook-port"),
        pytest.param({"podLabels": {"app": "other"}}, id="pod-label-the-selector-uses"),
        pytest.param({"failurePolicy": "Sometimes"}, id="failure-policy"),
        pytest.param({"certificates": {"mode": "vault"}}, id="certificate-mode"),
        pytest.param({"replicas": 0}, id="replicas"),
        pytest.param({"imagee": {}}, id="unknown-key"),
    ],
)
def test_values_the_schema_refuses(values):
    with pytest.raises(helm.HelmValuesError):
        helm.Chart.load(str(CHART)).validate_schema(values)


def test_the_chart_with_webhook_url_renders_the_webhook_configurations_of_the_e2e_overlay(tmp_path):
    """The e2e suite installs deploy/base with each webhook's clientConfig a url on loopback; the
    chart with webhookURL on the same address must give the API server the same configurations."""
    from tests.e2e.install import overlay

    kinds = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    rendered = keyed(o for o in render(webhookURL="https://127.0.0.1:18443") if o["kind"] in kinds)
    done = subprocess.run(
        [KUBECTL, "kustomize", str(overlay(tmp_path / "overlay", 18443))], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    applied = keyed(o for o in yaml.safe_load_all(done.stdout) if o and o["kind"] in kinds)
    for configuration in (*rendered.values(), *applied.values()):
        configuration["metadata"].pop("labels", None)
    assert rendered == applied


def test_team_namespaces_get_a_rolebinding_each_and_nothing_cluster_wide():
    objects = render(policies={"namespaced": True, "teamNamespaces": ["team-a", "team-b"]})
    bindings = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "gpu-admission-policies"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    assert {b["roleRef"]["name"] for b in bindings} == {"gpu-admission-namespaced-policies"}
    cluster_bound = {o["roleRef"]["name"] for o in objects if o["kind"] == "ClusterRoleBinding"}
    assert "gpu-admission-namespaced-policies" not in cluster_bound
    env, _ = deployment_env(objects)
    assert env["GPU_ADMISSION_LABELLED_NAMESPACES"] == "true"


def test_every_object_says_its_release_and_chart_and_no_selector_or_pod_template_does():
    """#41: no app.kubernetes.io/instance or helm.sh/chart labels; kept off selectors and the pod
    template, so a chart upgrade alone restarts no pod."""
    for obj in render():
        labels = obj["metadata"].get("labels") or {}
        if obj["kind"] != "CustomResourceDefinition":
            assert labels.get("app.kubernetes.io/instance") == "gpu-admission", obj["kind"]
            assert labels.get("helm.sh/chart", "").startswith("gpu-admission-"), obj["kind"]
        if obj["kind"] == "Deployment":
            assert not set(HELM_LABELS) & set(obj["spec"]["template"]["metadata"].get("labels") or {})
            assert not set(HELM_LABELS) & set(obj["spec"]["selector"]["matchLabels"])


def test_every_alert_reads_metrics_the_webhook_exports():
    """#41: no alert rules shipped. Each one's metrics are the webhook's own (or `up` of its job)."""
    import re

    from prometheus_client import REGISTRY

    import webhook.metrics  # noqa: F401  (registers them)
    from tools.monitoring import ALERTS

    exported = {m.name for m in REGISTRY.collect()} | {"up"}
    for alert in ALERTS:
        names = set(re.findall(r"\b(gpu_admission_[a-z_]+|up)\b", alert.expr))
        bases = {re.sub(r"_(total|bucket|count|sum)$", "", n) for n in names}
        assert names and bases <= exported, (alert.name, bases - exported)
    (rule,) = [o for o in render(metrics={"prometheusRule": {"enabled": True}}) if o["kind"] == "PrometheusRule"]
    assert [r["alert"] for r in rule["spec"]["groups"][0]["rules"]] == [a.name for a in ALERTS]
