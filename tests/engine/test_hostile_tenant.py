"""Enforcement a hostile tenant cannot walk around: every field of the pod is theirs to write, so
each way around a quota or a device rule is tried here as the API server would run it, over real
HTTPS: the mutating webhook, its patch applied by jsonpatch, then the validating webhook."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from tests.support.builders import engine_from, env, gpu_container, plain_container, pod, policy
from tests.support.server_harness import admission_review, api_server, holder_of

POLICIES = [
    policy(
        "slices-only",
        """
match: {namespaces: ["dev-*"]}
mig: {gpuModels: [A100-80GB], defaultProfile: 1g.10gb, allowedProfiles: [1g.10gb, 1g.20gb], multiGpu: deny}
quota: {limits: {gpus: 0, gpuEquivalents: "1"}}
""",
    ),
    policy("caps", 'match: {namespaces: [caps]}\nquota: {perPod: {gpuEquivalents: "1"}, limits: {pods: 10}}'),
    policy(
        "nvl", 'match: {namespaces: [nvl]}\nmig: {gpuModels: [H100-94GB]}\nquota: {perPod: {gpuEquivalents: "1/7"}}'
    ),
    policy("any-model", 'match: {namespaces: [any-model]}\nquota: {perPod: {gpuEquivalents: "1/7"}}'),
    policy("no-gpus", 'match: {namespaces: [no-gpus]}\nquota: {limits: {pods: 0, gpuEquivalents: "0"}}'),
    policy(
        "half-shares",
        'match: {namespaces: [shares]}\nquota: {perPod: {gpuEquivalents: "1/2"}, sharedWeight: "1/2"}',
    ),
    policy("secure", "match: {namespaces: [secure]}\nruntime: {runtimeClassName: nvidia}"),
    policy("relaxed", "match: {namespaces: [relaxed]}\nsecurity: {allow: [deviceEnv, hostDevices]}"),
    policy(
        "team",
        """
match: {namespaces: [team]}
rules:
  - {name: team-label, expression: "has(object.metadata.labels) && 'team' in object.metadata.labels",
     message: GPU pods need a team label, action: deny}
  - {name: owner-unchanged, message: the owner label may not change, action: deny,
     expression: "oldObject == null || !has(oldObject.metadata.labels) || !('owner' in oldObject.metadata.labels)
       || (has(object.metadata.labels) && 'owner' in object.metadata.labels
           && object.metadata.labels['owner'] == oldObject.metadata.labels['owner'])"}
""",
    ),
]
PRODUCT = "nvidia.com/gpu.product"
KUBELET = {"username": "system:node:gpu-1", "groups": ("system:nodes", "system:authenticated")}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with api_server(holder_of(engine_from(*POLICIES)), tmp_path_factory.mktemp("certs")) as server:
        yield server


def gpu_pod(
    namespace: str, resources: dict[str, Any], annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    container = {"name": "main", "image": "cuda", "resources": {"limits": resources}}
    return pod(container, namespace=namespace, annotations=annotations, **spec)


def with_annotations(obj: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    """`obj` with these annotations as written (tests.support.builders.pod prefixes a bare key with ours)."""
    obj["metadata"]["annotations"] = annotations
    return obj


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    selector_terms = [{"matchExpressions": term} for term in terms]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": selector_terms}}}


def product_in(*labels: str) -> list[dict[str, Any]]:
    return [{"key": PRODUCT, "operator": "In", "values": list(labels)}]


def with_labels(obj: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "labels": labels}}


def env_source(kind: str, namespace: str, **data: str) -> dict[str, Any]:
    """A ConfigMap or Secret with `data` as the API server holds it (a Secret's base64)."""
    if kind == "Secret":
        data = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": "env", "namespace": namespace}, "data": data}


H100_SLICE_NODE, H100_NODE = "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "NVIDIA-H100-80GB-HBM3"

WALKS = [
    # Whole GPUs charged as slices: any term that admits a whole-GPU node makes nvidia.com/gpu whole.
    (
        "whole-gpus-behind-one-slice-label",
        gpu_pod("caps", {"nvidia.com/gpu": 7}, affinity=affinity(product_in(H100_SLICE_NODE, H100_NODE))),
        "gpuEquivalents 7",
    ),
    (
        "whole-gpus-behind-an-ored-slice-term",
        gpu_pod(
            "caps",
            {"nvidia.com/gpu": 7},
            affinity=affinity(product_in(H100_SLICE_NODE), [{"key": "zone", "operator": "Exists"}]),
        ),
        "gpuEquivalents 7",
    ),
    (
        "whole-gpus-behind-notin",
        gpu_pod(
            "caps",
            {"nvidia.com/gpu": 2},
            affinity=affinity([{"key": PRODUCT, "operator": "NotIn", "values": [H100_NODE]}]),
        ),
        "gpuEquivalents 2",
    ),
    # Profiles asked for directly meet allowedProfiles, gpuModels and the one-device rule.
    (
        "a-whole-a100-as-a-7g-slice",
        gpu_pod("dev-alice", {"nvidia.com/mig-7g.80gb": 1}),
        "profile 7g.80gb is not allowed",
    ),
    ("two-3g-slices-in-one-container", gpu_pod("dev-alice", {"nvidia.com/mig-3g.40gb": 2}), "is not allowed"),
    ("two-1g-slices-in-one-container", gpu_pod("dev-alice", {"nvidia.com/mig-1g.10gb": 2}), "asks for 2 MIG devices"),
    ("an-a100-40gb-profile-under-a100-80gb", gpu_pod("dev-alice", {"nvidia.com/mig-1g.5gb": 1}), "is not allowed"),
    (
        "a-profile-no-gpu-has",
        gpu_pod("dev-alice", {"nvidia.com/mig-7g.999gb": 1}),
        "no GPU has this MIG profile; closest: nvidia.com/mig-",
    ),
    # A slice name several families share weighs the heaviest the pod can land on.
    ("an-ambiguous-slice-anywhere", gpu_pod("any-model", {"nvidia.com/mig-1g.24gb": 1}), "gpuEquivalents 1/4"),
    (
        "an-ambiguous-slice-with-a-model-annotation-alone",
        gpu_pod("any-model", {"nvidia.com/mig-1g.24gb": 1}, annotations={"gpu-model": "H100-94GB"}),
        "gpuEquivalents 1/4",
    ),
    # Shared GPUs are GPU pods, charged as shares of their device.
    ("time-sliced-whole-gpus", gpu_pod("no-gpus", {"nvidia.com/gpu.shared": 8}), "pods 0 + 1 exceeds 0"),
    (
        "a-time-sliced-slice",
        gpu_pod("no-gpus", {"nvidia.com/mig-1g.10gb.shared": 1}),
        "gpuEquivalents 0 + 1/7 exceeds 0",
    ),
    ("two-time-sliced-gpus-at-half-weight", gpu_pod("shares", {"nvidia.com/gpu.shared": 2}), "gpuEquivalents 1, over"),
    # GPU access without asking for a GPU.
    (
        "visible-devices-all-under-the-nvidia-runtime",
        pod(
            dict(plain_container(), env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
            namespace="secure",
            runtimeClassName="nvidia",
        ),
        "NVIDIA_VISIBLE_DEVICES = 'all'",
    ),
    (
        "visible-devices-in-an-init-container",
        pod(
            plain_container(),
            namespace="secure",
            init=(dict(plain_container("init"), env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0,1"}]),),
        ),
        "spec.initContainers[0].env[0]",
    ),
    (
        "visible-devices-from-a-configmap",
        pod(
            dict(
                gpu_container(),
                env=[{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}}],
            ),
            namespace="secure",
        ),
        "from valueFrom",
    ),
    (
        "mig-config-devices",
        pod(dict(plain_container(), env=[{"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"}]), namespace="secure"),
        "NVIDIA_MIG_CONFIG_DEVICES",
    ),
    (
        "envfrom-in-a-gpu-pod",
        pod(dict(gpu_container(), envFrom=[{"configMapRef": {"name": "env"}}]), namespace="secure"),
        "envFrom without a prefix",
    ),
    (
        "envfrom-with-a-prefix-that-spells-it",
        pod(
            dict(gpu_container(), envFrom=[{"prefix": "NVIDIA_", "configMapRef": {"name": "env"}}]), namespace="secure"
        ),
        "envFrom",
    ),
    # envFrom under a prefix of the device variables, in a pod that asks for no GPU: the NVIDIA
    # runtime may be the node's default, and no ConfigMap check tells VISIBLE_DEVICES from any key.
    (
        "envfrom-with-a-prefix-that-spells-it-in-a-pod-without-a-gpu",
        pod(dict(plain_container(), envFrom=[{"prefix": "NVIDIA_", "secretRef": {"name": "env"}}]), namespace="secure"),
        "envFrom prefix 'NVIDIA_' could spell NVIDIA_VISIBLE_DEVICES",
    ),
    # The key itself, where envFrom without a prefix (in any pod) would take it.
    (
        "a-configmap-that-sets-visible-devices",
        env_source("ConfigMap", "secure", NVIDIA_VISIBLE_DEVICES="all"),
        "ConfigMap key NVIDIA_VISIBLE_DEVICES grants GPU devices",
    ),
    (
        "a-secret-that-sets-mig-config-devices",
        env_source("Secret", "secure", NVIDIA_MIG_CONFIG_DEVICES="0"),
        "Secret key NVIDIA_MIG_CONFIG_DEVICES grants GPU devices",
    ),
    # A legacy CUDA image's variable, which envFrom hands to a GPU-less container: every GPU.
    (
        "a-configmap-with-cuda-version-and-no-requirement",
        env_source("ConfigMap", "secure", CUDA_VERSION="12.4.1"),
        "ConfigMap key CUDA_VERSION: CUDA_VERSION without NVIDIA_REQUIRE_CUDA",
    ),
    (
        "a-secret-with-cuda-version-and-no-requirement",
        env_source("Secret", "secure", CUDA_VERSION="12.4"),
        "Secret key CUDA_VERSION: CUDA_VERSION without NVIDIA_REQUIRE_CUDA",
    ),
    # The toolkit compares lengths: an empty NVIDIA_REQUIRE_CUDA is none.
    (
        "a-configmap-with-both-keys-the-requirement-empty",
        env_source("ConfigMap", "secure", CUDA_VERSION="12.4.1", NVIDIA_REQUIRE_CUDA=""),
        "ConfigMap key NVIDIA_REQUIRE_CUDA: an empty NVIDIA_REQUIRE_CUDA",
    ),
    (
        "a-configmap-that-only-blanks-the-requirement",
        env_source("ConfigMap", "secure", NVIDIA_REQUIRE_CUDA=""),
        "ConfigMap key NVIDIA_REQUIRE_CUDA: an empty NVIDIA_REQUIRE_CUDA",
    ),
    (  # the policy label is the writer's to set: it adds a lint, it takes no check away
        "a-policy-labelled-configmap-whose-key-is-cuda-version",
        with_labels(
            env_source("ConfigMap", "secure", CUDA_VERSION=policy("laundered")), {"gpu-admission.io/policy": "true"}
        ),
        "ConfigMap key CUDA_VERSION: CUDA_VERSION without NVIDIA_REQUIRE_CUDA",
    ),
    (
        "a-secret-whose-value-is-no-base64",
        {**env_source("Secret", "secure"), "data": {"NVIDIA_VISIBLE_DEVICES": "!!"}},
        "Secret key NVIDIA_VISIBLE_DEVICES grants GPU devices",
    ),
    (
        "a-hostpath-on-a-device",
        pod(plain_container(), namespace="secure", volumes=[{"name": "d", "hostPath": {"path": "/dev/nvidia0"}}]),
        "hostPath /dev/nvidia0",
    ),
    (
        "a-hostpath-on-dev-written-crookedly",
        pod(plain_container(), namespace="secure", volumes=[{"name": "d", "hostPath": {"path": "//dev/./"}}]),
        "hostPath //dev/./",
    ),
    (
        "a-hostpath-on-the-device-links",
        pod(plain_container(), namespace="secure", volumes=[{"name": "d", "hostPath": {"path": "/dev/char/195:0"}}]),
        "reaches the node's GPU devices",
    ),
    # Parents of a device root, and /var/run, which is /run on the host (kubelet resolves it).
    (
        "a-hostpath-on-the-parent-of-the-driver-root",
        pod(plain_container(), namespace="secure", volumes=[{"name": "d", "hostPath": {"path": "/run"}}]),
        "hostPath /run reaches the node's GPU devices",
    ),
    (
        "a-hostpath-on-var-run",
        pod(plain_container(), namespace="secure", volumes=[{"name": "d", "hostPath": {"path": "/var/run/nvidia"}}]),
        "hostPath /var/run/nvidia reaches the node's GPU devices",
    ),
    # accept-nvidia-visible-devices-as-volume-mounts: a mount under this directory is a device list.
    (
        "a-device-list-by-volume-mount",
        pod(
            dict(
                plain_container(),
                volumeMounts=[{"name": "d", "mountPath": "/var/run/nvidia-container-devices/all"}],
            ),
            namespace="secure",
            volumes=[{"name": "d", "hostPath": {"path": "/dev/null"}}],
        ),
        "a volume mounted at /var/run/nvidia-container-devices/all is read by the NVIDIA runtime as a device list",
    ),
    (
        "a-cdi-annotation",
        pod(plain_container(), namespace="secure", annotations={"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}),
        "asks the container runtime for NVIDIA devices",
    ),
    # The NVIDIA container toolkit's NRI plugin: a container's key, the pod's, and the bare key.
    *(
        (
            f"an-nri-cdi-annotation-{which}",
            with_annotations(pod(plain_container(), namespace="secure"), {key: "nvidia.com/gpu=all"}),
            f"metadata.annotations.{key}",
        )
        for which, key in (
            ("for-a-container", "nvidia.cdi.k8s.io/container.main"),
            ("for-the-pod", "nvidia.cdi.k8s.io/pod"),
            ("bare", "nvidia.cdi.k8s.io"),
        )
    ),
    # Past the device plugin: the CDI specs the runtime injects from, the kubelet's device-plugin
    # sockets (a pod can register as the GPU plugin), GPUs bound for passthrough; and /etc above.
    *(
        (
            f"a-hostpath-on-{path.strip('/').replace('/', '-')}",
            pod(plain_container(), namespace="secure", volumes=[{"name": "d", "hostPath": {"path": path}}]),
            f"hostPath {path} reaches the node's GPU devices",
        )
        for path in ("/etc/cdi", "/var/run/cdi", "/var/lib/kubelet/device-plugins", "/dev/vfio/7", "/etc")
    ),
    ("the-passthrough-alias", gpu_pod("no-gpus", {"nvidia.com/pgpu": 1}), "pods 0 + 1 exceeds 0"),
    # The toolkit's legacy images: CUDA_VERSION, no NVIDIA_REQUIRE_CUDA, no NVIDIA_VISIBLE_DEVICES.
    (
        "a-legacy-cuda-container-in-a-gpu-less-pod",
        pod(dict(plain_container(), env=[{"name": "CUDA_VERSION", "value": "12.4.1"}]), namespace="secure"),
        "legacy CUDA image (CUDA_VERSION set, NVIDIA_REQUIRE_CUDA empty) and hand it every GPU",
    ),
    (
        "a-legacy-cuda-container-whose-requirement-is-empty",
        pod(
            dict(plain_container(), env=[env("CUDA_VERSION", "12.4"), env("NVIDIA_REQUIRE_CUDA", "")]),
            namespace="secure",
        ),
        "spec.containers[0].env[1]",
    ),
    (
        "a-requirement-whose-last-duplicate-is-empty",
        pod(
            dict(
                plain_container(),
                env=[
                    env("CUDA_VERSION", "12.4"),
                    env("NVIDIA_REQUIRE_CUDA", "cuda>=12.4"),
                    env("NVIDIA_REQUIRE_CUDA", ""),
                ],
            ),
            namespace="secure",
        ),
        "spec.containers[0].env[2]",
    ),
    (
        "a-requirement-from-valuefrom",
        pod(
            dict(
                plain_container(),
                env=[{"name": "NVIDIA_REQUIRE_CUDA", "valueFrom": {"configMapKeyRef": {"name": "v", "key": "k"}}}],
            ),
            namespace="secure",
        ),
        "NVIDIA_REQUIRE_CUDA from valueFrom, which cannot be checked",
    ),
    (
        "a-requirement-naming-another-variable",
        pod(
            dict(plain_container(), env=[env("EMPTY", ""), env("NVIDIA_REQUIRE_CUDA", "$(EMPTY)")]), namespace="secure"
        ),
        "NVIDIA_REQUIRE_CUDA = '$(EMPTY)'",
    ),
    (  # the image's CUDA_VERSION and requirement, the pod's blank over it
        "a-requirement-only-blanked",
        pod(dict(plain_container(), env=[env("NVIDIA_REQUIRE_CUDA", "")]), namespace="secure"),
        "NVIDIA_REQUIRE_CUDA = '' beside a CUDA_VERSION",
    ),
    (  # env wins over envFrom: the pod's empty value over what its ConfigMap holds
        "an-empty-requirement-over-envfrom",
        pod(
            dict(plain_container(), envFrom=[{"configMapRef": {"name": "cuda"}}], env=[env("NVIDIA_REQUIRE_CUDA", "")]),
            namespace="secure",
        ),
        "spec.containers[0].env[0]",
    ),
    (
        "a-requirement-by-envfrom-prefix",
        pod(
            dict(plain_container(), envFrom=[{"prefix": "NVIDIA_REQUIRE_", "configMapRef": {"name": "v"}}]),
            namespace="secure",
        ),
        "envFrom prefix 'NVIDIA_REQUIRE_'",
    ),
    (
        "a-legacy-cuda-second-container-of-a-gpu-pod",
        pod(
            gpu_container(), dict(plain_container(), env=[{"name": "CUDA_VERSION", "value": "9.0"}]), namespace="secure"
        ),
        "spec.containers[1].env[0]",
    ),
    (
        "cuda-version-by-envfrom",
        pod(dict(plain_container(), envFrom=[{"prefix": "CUDA_", "configMapRef": {"name": "v"}}]), namespace="secure"),
        "envFrom prefix 'CUDA_'",
    ),
    # A user-settable annotation switches nothing off.
    (
        "a-mirror-annotation-from-a-user",
        gpu_pod("no-gpus", {"nvidia.com/gpu": 1}, annotations={"kubernetes.io/config.mirror": "x"}),
        "pods 0 + 1 exceeds 0",
    ),
]


@pytest.mark.parametrize("obj, reason", [w[1:] for w in WALKS], ids=[w[0] for w in WALKS])
def test_each_way_around_is_denied_with_its_reason(api, obj, reason):
    allowed, _, response = api.create(obj)
    assert not allowed, response
    assert reason in response["status"]["message"]


ALLOWED = [
    ("the-same-slice-pinned-by-the-policys-model", gpu_pod("nvl", {"nvidia.com/mig-1g.24gb": 1})),
    ("a-ray-head-with-gpu-0", gpu_pod("no-gpus", {"nvidia.com/gpu": 0})),
    ("one-time-sliced-gpu-at-half-weight", gpu_pod("shares", {"nvidia.com/gpu.shared": 1})),
    (
        "visible-devices-void",
        pod(dict(gpu_container(), env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]), namespace="secure"),
    ),
    (
        "cuda-version-with-its-requirement",
        pod(
            dict(
                plain_container(),
                env=[{"name": "CUDA_VERSION", "value": "12.4"}, {"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.4"}],
            ),
            namespace="secure",
        ),
    ),
    (
        "cuda-version-empty-beside-an-empty-requirement",
        pod(dict(plain_container(), env=[env("CUDA_VERSION", ""), env("NVIDIA_REQUIRE_CUDA", "")]), namespace="secure"),
    ),
    (
        "an-empty-requirement-with-visible-devices-void",
        pod(
            dict(plain_container(), env=[env("NVIDIA_REQUIRE_CUDA", ""), env("NVIDIA_VISIBLE_DEVICES", "void")]),
            namespace="secure",
        ),
    ),
    (
        "a-requirement-whose-last-duplicate-has-a-value",
        pod(
            dict(
                plain_container(),
                env=[
                    env("CUDA_VERSION", "12.4"),
                    env("NVIDIA_REQUIRE_CUDA", ""),
                    env("NVIDIA_REQUIRE_CUDA", "cuda>=12"),
                ],
            ),
            namespace="secure",
        ),
    ),
    (
        "a-configmap-with-cuda-version-and-its-requirement",
        env_source("ConfigMap", "secure", CUDA_VERSION="12.4.1", NVIDIA_REQUIRE_CUDA="cuda>=12.4"),
    ),
    (
        "cuda-version-in-a-gpu-container",
        pod(dict(gpu_container(), env=[{"name": "CUDA_VERSION", "value": "12.4"}]), namespace="secure"),
    ),
    (
        "visible-devices-none",
        pod(dict(gpu_container(), env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]), namespace="secure"),
    ),
    (
        "envfrom-without-a-prefix-in-a-pod-without-a-gpu",
        pod(dict(plain_container(), envFrom=[{"configMapRef": {"name": "env"}}]), namespace="secure"),
    ),
    (
        "envfrom-with-an-ordinary-prefix-in-a-gpu-pod",
        pod(dict(gpu_container(), envFrom=[{"prefix": "APP_", "configMapRef": {"name": "env"}}]), namespace="secure"),
    ),
    ("a-configmap-that-sets-visible-devices-void", env_source("ConfigMap", "secure", NVIDIA_VISIBLE_DEVICES="void")),
    ("a-secret-with-ordinary-keys", env_source("Secret", "secure", VISIBLE_DEVICES="all", TOKEN="x")),
    (
        "a-configmap-with-cuda-version-and-its-requirement",
        env_source("ConfigMap", "secure", CUDA_VERSION="12.4", NVIDIA_REQUIRE_CUDA="cuda>=12.4"),
    ),
    ("a-configmap-where-no-policy-reaches", env_source("ConfigMap", "elsewhere", NVIDIA_VISIBLE_DEVICES="all")),
    (
        "an-ordinary-hostpath",
        pod(gpu_container(), namespace="secure", volumes=[{"name": "d", "hostPath": {"path": "/var/log"}}]),
    ),
    (
        "devices-a-policy-allows",
        pod(
            dict(plain_container(), env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
            namespace="relaxed",
            volumes=[{"name": "d", "hostPath": {"path": "/dev"}}],
        ),
    ),
]


@pytest.mark.parametrize("obj", [a[1] for a in ALLOWED], ids=[a[0] for a in ALLOWED])
def test_what_grants_nothing_more_is_allowed(api, obj):
    allowed, _, response = api.create(obj)
    assert allowed, response


def test_a_secrets_values_are_never_quoted_back(api):
    allowed, _, response = api.create(env_source("Secret", "secure", NVIDIA_VISIBLE_DEVICES="s3cr3t-value"))
    assert not allowed
    assert "s3cr3t" not in response["status"]["message"]
    assert "data.NVIDIA_VISIBLE_DEVICES" in response["status"]["message"]


def test_a_configmap_update_that_keeps_a_key_it_already_had_only_warns(api):
    old = env_source("ConfigMap", "secure", NVIDIA_VISIBLE_DEVICES="all")
    allowed, response = api.update(old, env_source("ConfigMap", "secure", NVIDIA_VISIBLE_DEVICES="all", B="1"))
    assert allowed and any("already so before this update" in w for w in response["warnings"])
    allowed, _ = api.update(env_source("ConfigMap", "secure"), old)
    assert not allowed


def test_a_slice_the_policy_picks_the_model_of_is_pinned_to_that_models_nodes_and_weighs_its_weight(api):
    allowed, stored, _ = api.create(gpu_pod("nvl", {"nvidia.com/mig-1g.24gb": 1}))
    assert allowed
    term = stored["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (expression,) = term["nodeSelectorTerms"][0]["matchExpressions"]
    nvl = ["NVIDIA-H100-NVL", "NVIDIA-H800-NVL"]
    assert expression == {"key": PRODUCT, "operator": "In", "values": nvl + [f"{label}-SHARED" for label in nvl]}


def test_a_kubelets_mirror_pod_is_skipped_and_only_a_kubelets(api):
    mirror = gpu_pod("no-gpus", {"nvidia.com/gpu": 1}, annotations={"kubernetes.io/config.mirror": "x"})
    assert api.create(mirror, **KUBELET)[0]
    assert not api.create(mirror, username="system:node:gpu-1", groups=("dev",))[0]


@pytest.mark.parametrize(
    "value",
    ["1 ", "١", "NaN", "Infinity", "1_0Gi", "0.5", "999m", "-1", "1e600000", 1.5, True, "1e3.5"],
    ids=lambda v: repr(v),
)
def test_quantities_outside_kubernetes_grammar_or_not_whole_are_denied_naming_the_field(api, value):
    obj = gpu_pod("caps", {"nvidia.com/mig-1g.10gb": value})
    for path in ("/mutate", "/validate"):
        status, body = api.client.review(path, admission_review(obj))
        assert status == 200 and body["response"]["allowed"] is False, (path, body)
        assert body["response"]["status"]["code"] == 422
        assert "spec.containers[0].resources.limits.nvidia.com/mig-1g.10gb" in body["response"]["status"]["message"]


def finished_pod(**labels: str) -> dict[str, Any]:
    obj = gpu_pod("team", {"nvidia.com/gpu": 1})
    obj["metadata"].update(labels=labels or None, finalizers=["batch.kubernetes.io/job-tracking"])
    obj["status"] = {"phase": "Succeeded"}
    return obj


def test_an_update_that_only_removes_a_finalizer_passes_a_rule_the_pod_already_broke(api):
    old = finished_pod()
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = []
    allowed, response = api.update(old, new, username="system:serviceaccount:kube-system:job-controller")
    assert allowed, response
    assert any("already so before this update" in w for w in response["warnings"])


def test_an_update_that_breaks_a_rule_anew_is_denied_and_cel_sees_the_old_object(api):
    old = finished_pod(team="a", owner="ann")
    allowed, response = api.update(old, finished_pod(owner="ann"))
    assert not allowed and "GPU pods need a team label" in response["status"]["message"]
    allowed, response = api.update(old, finished_pod(team="a", owner="bob"))
    assert not allowed and "the owner label may not change" in response["status"]["message"]


def test_a_pod_being_deleted_passes_any_update(api):
    old = finished_pod()
    new = copy.deepcopy(old)
    new["metadata"]["deletionTimestamp"] = "2026-12-03T10:00:00Z"
    assert api.update(old, new)[0]


def test_an_ephemeral_container_is_judged_for_its_device_access(api):
    old = pod(gpu_container(), namespace="secure")
    debug = {"name": "debug", "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [debug]
    allowed, response = api.update(old, new, sub_resource="ephemeralcontainers")
    assert not allowed and "spec.ephemeralContainers[0].env[0]" in response["status"]["message"]
    new["spec"]["ephemeralContainers"] = [dict(debug, env=[])]
    assert api.update(old, new, sub_resource="ephemeralcontainers")[0]


def test_a_rule_sees_the_debug_container_being_added_and_what_the_pod_was_is_not_held_against_it():
    from policies.judge.quota import NoUsage
    from policies.review.request import Operation, RequestInfo

    non_root = "has(c.securityContext) && has(c.securityContext.runAsNonRoot) && c.securityContext.runAsNonRoot"
    expression = f"!has(object.spec.ephemeralContainers) || object.spec.ephemeralContainers.all(c, {non_root})"
    rule = f'rules:\n  - name: debug-as-non-root\n    expression: "{expression}"\n'
    rule += "    message: debug containers run as non-root\n"
    no_root_debug = policy("no-root-debug", rule)
    engine = engine_from(no_root_debug)
    old = pod(gpu_container(), namespace="ml")
    debug = {"name": "debug", "image": "busybox"}
    added = copy.deepcopy(old)
    added["spec"]["ephemeralContainers"] = [debug]
    update = RequestInfo("ml", Operation.UPDATE, sub_resource="ephemeralcontainers", old_object=old)
    decision = engine.validate(added, NoUsage(), update)
    assert not decision.allowed and "debug containers run as non-root" in decision.message
    safe = copy.deepcopy(old)
    safe["spec"]["ephemeralContainers"] = [dict(debug, securityContext={"runAsNonRoot": True})]
    assert engine.validate(safe, NoUsage(), update).allowed
    again = copy.deepcopy(added)  # a second debug container beside one the pod already had
    again["spec"]["ephemeralContainers"].append(dict(debug, name="d2", securityContext={"runAsNonRoot": True}))
    ratcheted = engine.validate(again, NoUsage(), update._replace(old_object=added))
    assert ratcheted.allowed and any("already so before this update" in w for w in ratcheted.warnings)


def test_a_controller_is_judged_in_its_own_namespace_whatever_its_template_says(api):
    template = gpu_pod("elsewhere", {"nvidia.com/gpu": 2})
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "caps"},
        "spec": {"replicas": 1, "template": {"metadata": template["metadata"], "spec": template["spec"]}},
    }
    allowed, _, response = api.create(deployment)
    assert not allowed and "caps: pod asks for gpuEquivalents 2" in response["status"]["message"]


def test_a_huge_exponent_is_refused_without_building_the_number(api):
    # 10^600000 as an integer takes seconds to build; the parser refuses it from the exponent alone.
    status, body = api.client.review("/validate", admission_review(gpu_pod("caps", {"nvidia.com/gpu": "1e600000"})))
    assert status == 200 and "more than 2^63-1" in body["response"]["status"]["message"]


def test_the_namespace_is_the_api_servers_not_the_objects(api):
    obj = gpu_pod("caps", {"nvidia.com/gpu": 2})
    allowed, _, response = api.create(obj, namespace="elsewhere")  # a forged object namespace: the request's wins
    assert allowed, response
