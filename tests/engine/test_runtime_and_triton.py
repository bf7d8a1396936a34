"""Runtime settings and the Triton sidecar, as the matching policies give them."""

import pytest

from tests.support.builders import engine_from, gpu_container, plain_container, pod, policy

RUNTIME = policy(
    "rt",
    """
mig:
  gpuModels: [A100-80GB]
  defaultProfile: 1g.10gb
runtime:
  runtimeClassName: nvidia
  tolerations:
    - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
  nodeSelector: {pool: gpu}
  env: {NVIDIA_DRIVER_CAPABILITIES: "compute,utility"}
  shmSize: 2Gi
""",
)
TRITON = policy(
    "serving",
    """
mig:
  gpuModels: [A100-80GB]
triton:
  image: nvcr.io/nvidia/tritonserver:24.08-py3
  modelRepository: s3://models
  profile: 1g.10gb
""",
)


def test_gpu_pods_get_the_runtime_class_tolerations_selector_env_and_shm():
    spec = engine_from(RUNTIME).mutate(pod(gpu_container(), plain_container())).object["spec"]
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["nodeSelector"] == {"pool": "gpu"}
    gpu, other = spec["containers"]
    assert gpu["env"] == [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]
    assert gpu["volumeMounts"] == [{"name": "gpu-admission-shm", "mountPath": "/dev/shm"}]
    assert "env" not in other and "volumeMounts" not in other
    assert spec["volumes"] == [{"name": "gpu-admission-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}]


def test_existing_tolerations_are_merged_not_duplicated():
    existing = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists"},
    ]
    spec = engine_from(RUNTIME).mutate(pod(tolerations=existing)).object["spec"]
    assert spec["tolerations"] == existing


EQUAL = policy("eq", "runtime: {tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]}")


@pytest.mark.parametrize(
    "toleration, added",
    [
        pytest.param({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, False, id="no-operator-is-Equal"),
        pytest.param({"key": "dedicated", "operator": "", "value": "gpu", "effect": "NoSchedule"}, False, id="empty"),
        pytest.param({"key": "dedicated", "operator": "Equal", "value": "gpu"}, True, id="other-effect"),
        pytest.param({"key": "dedicated", "value": "cpu", "effect": "NoSchedule"}, True, id="another-value"),
        pytest.param(
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule", "tolerationSeconds": 5}, True, id="seconds"
        ),
    ],
)
def test_a_toleration_is_added_unless_the_pod_has_it_as_the_api_server_compares_them(toleration, added):
    spec = engine_from(EQUAL).mutate(pod(gpu_container(), tolerations=[toleration])).object["spec"]
    assert len(spec["tolerations"]) == (2 if added else 1)


def test_a_missing_toleration_is_added_after_the_pods_own():
    spot = {"key": "spot", "operator": "Exists"}
    spec = engine_from(RUNTIME).mutate(pod(tolerations=[spot])).object["spec"]
    assert spec["tolerations"] == [spot, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_user_values_win_and_the_user_is_told():
    container = gpu_container(env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}])
    result = engine_from(RUNTIME).mutate(pod(container, runtimeClassName="custom", nodeSelector={"pool": "big"}))
    spec = result.object["spec"]
    assert spec["runtimeClassName"] == "custom"
    assert spec["nodeSelector"] == {"pool": "big"}
    assert spec["containers"][0]["env"] == [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}]
    joined = "\n".join(result.warnings)
    assert "keeps runtimeClassName custom" in joined and "keeps nodeSelector pool=big" in joined
    assert "keeps env NVIDIA_DRIVER_CAPABILITIES" in joined


def test_a_container_that_already_mounts_dev_shm_keeps_its_own():
    container = gpu_container(volumeMounts=[{"name": "mine", "mountPath": "/dev/shm"}])
    spec = engine_from(RUNTIME).mutate(pod(container, volumes=[{"name": "mine", "emptyDir": {}}])).object["spec"]
    assert spec["volumes"] == [{"name": "mine", "emptyDir": {}}]


def test_every_mutation_is_recorded_in_the_mutated_annotation():
    result = engine_from(RUNTIME).mutate(pod())
    recorded = result.object["metadata"]["annotations"]["gpu-admission.io/mutated"]
    for change in result.changes:
        assert str(change) in recorded


def test_triton_inject_adds_the_sidecar_as_tritons_examples_run_it():
    spec = engine_from(TRITON).mutate(pod(plain_container("app"), annotations={"triton": "inject"})).object["spec"]
    triton = spec["containers"][-1]
    assert triton["name"] == "triton"
    assert triton["image"] == "nvcr.io/nvidia/tritonserver:24.08-py3"
    assert triton["command"] == ["tritonserver"] and triton["args"] == ["--model-repository=s3://models"]
    assert [(p["name"], p["containerPort"]) for p in triton["ports"]] == [
        ("http", 8000),
        ("grpc", 8001),
        ("metrics", 8002),
    ]
    assert triton["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert triton["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert triton["startupProbe"]["failureThreshold"] == 30
    assert triton["resources"] == {
        "limits": {"memory": "4Gi", "nvidia.com/mig-1g.10gb": "1"},
        "requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/mig-1g.10gb": "1"},
    }
    assert {"name": "gpu-admission-shm", "mountPath": "/dev/shm"} in triton["volumeMounts"]
    assert spec["volumes"][0]["emptyDir"]["medium"] == "Memory"


def test_the_model_repository_annotation_overrides_the_policy():
    annotations = {"triton": "inject", "triton-model-repository": "gs://other"}
    spec = engine_from(TRITON).mutate(pod(plain_container("app"), annotations=annotations)).object["spec"]
    assert spec["containers"][-1]["args"] == ["--model-repository=gs://other"]


def test_an_existing_triton_container_is_not_replaced():
    mine = {"name": "triton", "image": "my-triton"}
    result = engine_from(TRITON).mutate(pod(plain_container("app"), mine, annotations={"triton": "inject"}))
    assert result.object["spec"]["containers"][1] == mine
    assert len(result.object["spec"]["containers"]) == 2


def test_triton_without_a_model_repository_is_reported():
    bare = policy("bare", "triton:\n  image: t:1")
    result = engine_from(bare).mutate(pod(plain_container("app"), annotations={"triton": "inject"}))
    assert "model-repository" in str(result.problems[0])


def test_triton_can_run_as_a_native_sidecar():
    native = policy("native", "triton:\n  modelRepository: s3://m\n  nativeSidecar: true")
    spec = engine_from(native).mutate(pod(plain_container("app"), annotations={"triton": "inject"})).object["spec"]
    assert spec["initContainers"][0]["name"] == "triton"
    assert spec["initContainers"][0]["restartPolicy"] == "Always"


def test_a_second_pass_over_the_output_changes_nothing():
    engine = engine_from(RUNTIME, TRITON)
    first = engine.mutate(pod(gpu_container(), annotations={"triton": "inject", "gpu-memory": "12Gi"}))
    second = engine.mutate(first.object)
    assert first.changes and not second.changes
    assert second.object is first.object


def test_a_sidecar_that_cannot_be_added_is_denied_by_the_validating_side_as_the_warning_said():
    from policies.judge.quota import NoUsage

    engine = engine_from(policy("p", "mig: {gpuModels: [A100-80GB], defaultProfile: 1g.10gb}"))
    result = engine.mutate(pod(gpu_container(), annotations={"triton": "inject"}))
    assert any(w.startswith("will be denied: metadata.annotations: triton: inject needs") for w in result.warnings)
    decision = engine.validate(result.object, NoUsage())
    assert not decision.allowed and "triton: inject needs gpu-admission.io/triton-model-repository" in decision.message


SINGLE_TRITON = policy(
    "single-serving",
    """
mig: {strategy: single, gpuModels: [A100-80GB], defaultProfile: 1g.10gb}
triton: {modelRepository: "s3://models", profile: 2g.20gb}
""",
)


def test_under_single_strategy_a_sidecar_on_a_cpu_pod_steers_the_pod_to_nodes_split_into_its_profile():
    result = engine_from(SINGLE_TRITON).mutate(pod(plain_container(), annotations={"triton": "inject"}))
    spec = result.object["spec"]
    sidecar = spec["containers"][-1]
    assert sidecar["resources"]["limits"] == {"memory": "4Gi", "nvidia.com/gpu": "1"}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    names = ("A100-SXM4-80GB", "A100-80GB-PCIe", "A800-SXM4-80GB", "A800-80GB-PCIe")
    exclusive = [f"NVIDIA-{name}-MIG-2g.20gb" for name in names]
    assert terms[0]["matchExpressions"][0]["values"] == exclusive + [f"{label}-SHARED" for label in exclusive]


def test_under_single_strategy_a_sidecar_gets_the_pods_profile_and_the_user_is_told():
    result = engine_from(SINGLE_TRITON).mutate(pod(gpu_container(), annotations={"triton": "inject"}))
    assert "triton: gets what its node offers (1g.10gb), not 2g.20gb: single strategy" in result.warnings
    terms = result.object["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    values = terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert all(v.removesuffix("-SHARED").endswith("-MIG-1g.10gb") for v in values)


def restricted_violations(container: dict) -> list[str]:
    """Pod Security Standards `restricted`, the container-level checks (pod-level fields unset)."""
    sc = container.get("securityContext") or {}
    found = []
    if sc.get("privileged"):
        found.append("privileged")
    if sc.get("allowPrivilegeEscalation") is not False:
        found.append("allowPrivilegeEscalation != false")
    caps = sc.get("capabilities") or {}
    if "ALL" not in (caps.get("drop") or []):
        found.append("capabilities.drop lacks ALL")
    if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
        found.append("capabilities.add beyond NET_BIND_SERVICE")
    if sc.get("runAsNonRoot") is not True:
        found.append("runAsNonRoot != true")
    if sc.get("runAsUser") == 0:
        found.append("runAsUser 0")
    if (sc.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        found.append("seccompProfile")
    if any("hostPort" in port for port in container.get("ports") or []):
        found.append("hostPort")
    return found


def test_the_sidecar_passes_pod_security_restricted_as_a_container_and_as_a_native_sidecar():
    for native in (False, True):
        text = TRITON.replace("profile: 1g.10gb", f"profile: 1g.10gb\n    nativeSidecar: {str(native).lower()}")
        spec = engine_from(text).mutate(pod(plain_container("app"), annotations={"triton": "inject"})).object["spec"]
        sidecar = next(c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == "triton")
        assert restricted_violations(sidecar) == []
        assert all("hostPath" not in v for v in spec["volumes"])


def test_the_sidecar_takes_its_cpu_and_memory_from_the_policy():
    text = TRITON.replace("profile: 1g.10gb", "profile: 1g.10gb\n    resources: {cpu: 500m, memory: 12Gi}")
    sidecar = (
        engine_from(text)
        .mutate(pod(plain_container("app"), annotations={"triton": "inject"}))
        .object["spec"]["containers"][-1]
    )
    assert sidecar["resources"]["requests"] == {"cpu": "500m", "memory": "12Gi", "nvidia.com/mig-1g.10gb": "1"}
    assert sidecar["resources"]["limits"] == {"memory": "12Gi", "nvidia.com/mig-1g.10gb": "1"}


def test_a_pod_with_pod_level_resources_keeps_them_and_the_sidecar_shares_them():
    """Kubernetes 1.34+: a pod's `spec.resources` must cover its containers' CPU and memory, so a
    sidecar with its own would make the pod invalid (a 422 at create)."""
    asked = pod(plain_container("app"), annotations={"triton": "inject"})
    asked["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}}
    result = engine_from(TRITON).mutate(asked)
    triton = result.object["spec"]["containers"][-1]
    assert triton["resources"] == {
        "limits": {"nvidia.com/mig-1g.10gb": "1"},
        "requests": {"nvidia.com/mig-1g.10gb": "1"},
    }
    assert result.object["spec"]["resources"] == asked["spec"]["resources"]
    assert any("shares the pod's spec.resources" in w for w in result.warnings)
