"""The third round of enforcement against the real API server, where it depends on what the API
server lets a pod become: a gated pod narrowed onto split nodes by UPDATE, a pod that finished
giving its strict reservation back, a debug container asking for devices, a device list by
mount, and KAI's fractions counted by a quota."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import Installation, policy_configmap, wait_for, wait_refused
from tests.e2e.kubectl import Kubectl

NARROW, FINISH, FRACTIONS, DEBUG = "narrow-team", "finish-team", "fractions-team", "debug-team"
POLICY = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: {name}
spec:
  match:
    namespaces: [{namespace}]
  quota:
    limits: {limits}
"""
SLICE_NODE = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}


def gpu_pod(name: str, namespace: str, gated: bool = False, **extra: Any) -> str:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    spec: dict[str, Any] = {"containers": [container]}
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/queue"}]
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, **extra.pop("metadata", {})}
    spec.update(extra)
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})


@pytest.fixture(scope="module")
def tenants(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    limits = {
        NARROW: '{slices: {"1g.10gb": 1}}',
        FINISH: "{pods: 1}",
        FRACTIONS: '{gpuEquivalents: "1"}',
        DEBUG: "{pods: 10}",
    }
    for namespace, limit in limits.items():
        kubectl.run("create", "namespace", namespace)
        kubectl.apply(
            policy_configmap(
                f"e2e-{namespace}", POLICY.format(name=f"e2e-{namespace}", namespace=namespace, limits=limit)
            )
        )
    probe = gpu_pod("probe", FINISH)
    kubectl.create(gpu_pod("first", FINISH))
    wait_refused(kubectl, probe, "the e2e-finish-team quota to be in force")
    return kubectl


def test_a_gated_pod_narrowed_onto_split_nodes_by_update_is_judged_against_the_slice_budget(tenants: Kubectl):
    for name in ("a", "b"):
        tenants.create(gpu_pod(name, NARROW, gated=True))
    narrow = json.dumps({"spec": {"nodeSelector": SLICE_NODE}})
    tenants.run("patch", "pod", "a", "-n", NARROW, "--type=merge", "-p", narrow)
    result = tenants.run("patch", "pod", "b", "-n", NARROW, "--type=merge", "-p", narrow, check=False)
    assert result.code != 0
    assert "denied the request" in result.stderr and "slices 1g.10gb 1 + 1 exceeds 1" in result.stderr
    assert tenants.get("pod", "a", "-n", NARROW)["spec"]["nodeSelector"] == SLICE_NODE


def test_a_pod_that_finished_gives_its_strict_reservation_back_at_once(tenants: Kubectl):
    status = json.dumps({"status": {"phase": "Succeeded"}})
    tenants.run("patch", "pod", "first", "-n", FINISH, "--subresource=status", "--type=merge", "-p", status)
    wait_for(lambda: tenants.create(gpu_pod("second", FINISH), check=False).code == 0, "the finished pod's budget")


def test_a_debug_container_that_asks_for_devices_is_refused(tenants: Kubectl):
    tenants.create(gpu_pod("debugged", DEBUG))
    args = ["debug", "pod/debugged", "-n", DEBUG, "--image=busybox", "--container=dbg"]
    result = tenants.run(*args, "--env=NVIDIA_VISIBLE_DEVICES=all", check=False)
    assert result.code != 0
    assert "NVIDIA_VISIBLE_DEVICES = 'all' would hand the container GPU devices" in result.stderr


def test_a_device_list_by_volume_mount_is_refused_in_a_pod_without_a_gpu(tenants: Kubectl):
    container = {
        "name": "main",
        "image": "busybox",
        "volumeMounts": [{"name": "null", "mountPath": "/var/run/nvidia-container-devices/all"}],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "device-list", "namespace": DEBUG},
        "spec": {"containers": [container], "volumes": [{"name": "null", "hostPath": {"path": "/dev/null"}}]},
    }
    result = tenants.create(json.dumps(pod), check=False)
    assert result.code != 0 and "read by the NVIDIA runtime as a device list" in result.stderr


def test_kai_fractions_are_charged_as_the_fraction_they_ask(tenants: Kubectl):
    for name in ("half-1", "half-2"):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": FRACTIONS}}
        pod["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
        pod["spec"] = {"containers": [{"name": "main", "image": "cuda"}], "schedulerName": "kai-scheduler"}
        tenants.create(json.dumps(pod))
    result = tenants.create(gpu_pod("one-more", FRACTIONS), check=False)
    assert result.code != 0 and "gpuEquivalents" in result.stderr


def plain_pod(name: str, annotations: dict[str, str] | None = None, host_path: str = "") -> str:
    """A pod asking for no GPU, in the debug team's namespace."""
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    spec: dict[str, Any] = {"containers": [container]}
    if host_path:
        container["volumeMounts"] = [{"name": "host", "mountPath": "/host"}]
        spec["volumes"] = [{"name": "host", "hostPath": {"path": host_path}}]
    metadata: dict[str, Any] = {"name": name, "namespace": DEBUG, "annotations": annotations or {}}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})


def legacy_cuda_pod(name: str = "legacy", *env: tuple[str, str]) -> str:
    """A GPU-less pod whose container leaves CUDA_VERSION set and NVIDIA_REQUIRE_CUDA empty (or
    unset): the toolkit's legacy image, handed every GPU where the NVIDIA runtime is the node's
    default."""
    pod = json.loads(plain_pod(name))
    written = env or (("CUDA_VERSION", "11.0"),)
    pod["spec"]["containers"][0]["env"] = [{"name": n, "value": v} for n, v in written]
    return json.dumps(pod)


@pytest.mark.parametrize(
    "manifest, reason",
    [
        pytest.param(
            plain_pod("nri", {"nvidia.cdi.k8s.io/container.main": "nvidia.com/gpu=all"}),
            "nvidia.cdi.k8s.io/container.main: nvidia.com/gpu=all asks the container runtime for NVIDIA devices",
            id="the-nri-plugins-container-key",
        ),
        pytest.param(
            plain_pod("nri-bare", {"nvidia.cdi.k8s.io": "all"}),
            "nvidia.cdi.k8s.io: all asks the container runtime for NVIDIA devices",
            id="the-nri-plugins-bare-key",
        ),
        pytest.param(plain_pod("cdi-specs", host_path="/etc/cdi"), "hostPath /etc/cdi", id="cdi-specs"),
        pytest.param(legacy_cuda_pod(), "legacy CUDA image (CUDA_VERSION set", id="a-legacy-cuda-container"),
        pytest.param(  # nothing but a blank over the image's requirement: sent to the webhook all the same
            legacy_cuda_pod("blank", ("NVIDIA_REQUIRE_CUDA", "")),
            "NVIDIA_REQUIRE_CUDA = '' beside a CUDA_VERSION",
            id="a-requirement-only-blanked",
        ),
        pytest.param(
            legacy_cuda_pod("last-empty", ("NVIDIA_REQUIRE_CUDA", "cuda>=12"), ("NVIDIA_REQUIRE_CUDA", "")),
            "spec.containers[0].env[1]",
            id="a-requirement-whose-last-duplicate-is-empty",
        ),
        pytest.param(
            plain_pod("plugins", host_path="/var/lib/kubelet/device-plugins"),
            "hostPath /var/lib/kubelet/device-plugins",
            id="the-device-plugin-sockets",
        ),
    ],
)
def test_the_runtimes_own_ways_to_a_gpu_reach_the_webhook_and_are_refused(tenants: Kubectl, manifest, reason):
    """Fourth round: the shipped matchConditions send these GPU-less pods, and each is refused."""
    result = tenants.create(manifest, check=False)
    assert result.code != 0 and reason in result.stderr, result.stderr


def configmap(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> str:
    metadata = {"name": name, "namespace": DEBUG, "labels": labels or {}}
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})


@pytest.mark.parametrize(
    "manifest, reason",
    [
        pytest.param(
            configmap("both", {"CUDA_VERSION": "12.4.1", "NVIDIA_REQUIRE_CUDA": ""}),
            "ConfigMap key NVIDIA_REQUIRE_CUDA: an empty NVIDIA_REQUIRE_CUDA",
            id="both-keys-the-requirement-empty",
        ),
        pytest.param(  # a policy the label says it is, in a namespace no policy is read from
            configmap(
                "laundered",
                {"CUDA_VERSION": POLICY.format(name="laundered", namespace=DEBUG, limits="{pods: 1}")},
                {"gpu-admission.io/policy": "true"},
            ),
            "ConfigMap key CUDA_VERSION: CUDA_VERSION without NVIDIA_REQUIRE_CUDA",
            id="a-policy-label-over-a-cuda-version-key",
        ),
    ],
)
def test_every_configmap_is_judged_as_an_env_source_by_the_toolkits_values(tenants: Kubectl, manifest, reason):
    result = tenants.create(manifest, check=False)
    assert result.code != 0 and reason in result.stderr, result.stderr


def test_a_triton_sidecar_in_a_pod_with_pod_level_resources_leaves_the_pod_valid(tenants: Kubectl):
    """Kubernetes 1.34+ refuses a pod whose containers ask more CPU or memory than its own
    `spec.resources`: the sidecar shares the pod's instead of adding its own."""
    annotations = {"gpu-admission.io/triton": "inject", "gpu-admission.io/triton-model-repository": "s3://models"}
    pod = json.loads(plain_pod("pod-level", annotations))
    pod["spec"]["resources"] = {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": "500m", "memory": "1Gi"},
    }
    result = tenants.create(json.dumps(pod), "--dry-run=server", "-o", "json", check=False)
    assert result.code == 0, result.stderr
    containers = json.loads(result.stdout)["spec"]["containers"]
    assert [c["name"] for c in containers] == ["main", "triton"]
