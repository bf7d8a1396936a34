"""MIG rewrite: which profile a whole-GPU container gets, per model and strategy."""

import pytest

from policies.judge.quota import NoUsage
from policies.review.request import RequestInfo
from tests.support.builders import engine_from, gpu_container, plain_container, pod, policy


def mig_policy(models="[A100-80GB]", strategy="mixed", default="", allowed="", extra=""):
    lines = [f"strategy: {strategy}", f"gpuModels: {models}"]
    if default:
        lines.append(f"defaultProfile: {default}")
    if allowed:
        lines.append(f"allowedProfiles: {allowed}")
    if extra:
        lines.append(extra)
    return policy("gpu", "mig:\n" + "\n".join("  " + line for line in lines))


def limits(result, index=0, init=False):
    return result.object["spec"]["initContainers" if init else "containers"][index]["resources"]


MEMORY_CASES = [
    ("A100-80GB", "8Gi", "1g.10gb"),
    ("A100-80GB", "9Gi", "1g.10gb"),
    ("A100-80GB", "15Gi", "1g.20gb"),
    ("A100-80GB", "30Gi", "3g.40gb"),
    ("A100-80GB", "78Gi", "7g.80gb"),
    ("A100-40GB", "4608Mi", "1g.5gb"),
    ("A100-40GB", "6Gi", "1g.10gb"),
    ("H100-80GB", "19Gi", "1g.20gb"),
    ("H100-94GB", "40Gi", "3g.47gb"),
    ("H200-141GB", "16Gi", "1g.18gb"),
    ("H200-141GB", "100Gi", "7g.141gb"),
    ("GH200-144GB", "30Gi", "1g.36gb"),
    ("B200-180GB", "44Gi", "1g.45gb"),
    ("GB200-186GB", "80Gi", "3g.93gb"),
    ("B300-288GB", "200Gi", "7g.269gb"),
    ("A30-24GB", "7Gi", "2g.12gb"),
    ("RTX-PRO-6000-96GB", "30Gi", "2g.48gb"),
]


@pytest.mark.parametrize("model, memory, profile", MEMORY_CASES, ids=[f"{m}-{g}" for m, g, _ in MEMORY_CASES])
def test_gpu_memory_picks_the_smallest_profile_of_the_model_that_covers_it(model, memory, profile):
    engine = engine_from(mig_policy(models=f"[{model}]"))
    result = engine.mutate(pod(gpu_container(), annotations={"gpu-memory": memory}))
    resource = f"nvidia.com/mig-{profile}"
    assert limits(result) == {"limits": {resource: "1"}, "requests": {resource: "1"}}


@pytest.mark.parametrize(
    "model, memory, profile, said",
    [
        ("H100-80GB", "10Gi", "1g.20gb", "1g.20gb has 20096 MiB on H100-80GB (observed by NVIDIA)"),
        ("H200-141GB", "17Gi", "1g.35gb", "1g.35gb has 33024 MiB on H200-141GB (observed by NVIDIA)"),
        ("B300-288GB", "34Gi", "1g.67gb", "1g.67gb has 60375 MiB on B300-288GB (estimated)"),
    ],
    ids=["h100-10gb-name-holds-9984MiB", "h200-18gb-name-holds-16GiB", "b300-unobserved-estimated-low"],
)
def test_gpu_memory_is_sized_on_real_memory_and_the_record_says_which_figure(model, memory, profile, said):
    """A profile's name rounds its memory up: `gpu-memory: 10Gi` does not fit an H100 1g.10gb."""
    engine = engine_from(mig_policy(models=f"[{model}]"))
    result = engine.mutate(pod(gpu_container(), annotations={"gpu-memory": memory}))
    assert limits(result)["limits"] == {f"nvidia.com/mig-{profile}": "1"}
    assert any(said in str(change) for change in result.changes), [str(c) for c in result.changes]


def test_a_need_no_profile_really_holds_is_refused_with_the_real_figures():
    engine = engine_from(mig_policy(models="[A100-80GB]"))
    decision = engine.validate(pod(gpu_container(), annotations={"gpu-memory": "80Gi"}), NoUsage())
    assert not decision.allowed
    assert "no allowed MIG profile has 80Gi of real memory: 7g.80gb has 80384 MiB on A100-80GB" in decision.message


def test_legacy_gb200_profiles_are_recognised_but_never_picked_by_memory():
    engine = engine_from(mig_policy(models="[GB200-186GB]"))
    result = engine.mutate(pod(gpu_container(), annotations={"gpu-memory": "20Gi"}))
    assert limits(result)["limits"] == {"nvidia.com/mig-1g.23gb": "1"}  # not the early drivers' 1g.24gb
    named = engine.mutate(pod(gpu_container(), annotations={"mig-profile": "7g.189gb"}))
    assert limits(named)["limits"] == {"nvidia.com/mig-7g.189gb": "1"}


def test_an_explicit_profile_wins_over_memory_and_default():
    engine = engine_from(mig_policy(default="1g.10gb"))
    result = engine.mutate(pod(annotations={"mig-profile": "2g.20gb", "gpu-memory": "70Gi"}))
    assert "nvidia.com/mig-2g.20gb" in limits(result)["limits"]


def test_a_per_container_profile_wins_over_the_pod_profile():
    engine = engine_from(mig_policy())
    result = engine.mutate(
        pod(gpu_container("a"), gpu_container("b"), annotations={"mig-profile": "1g.10gb", "mig-profile.b": "3g.40gb"})
    )
    assert "nvidia.com/mig-1g.10gb" in limits(result, 0)["limits"]
    assert "nvidia.com/mig-3g.40gb" in limits(result, 1)["limits"]


def test_the_policy_default_profile_serves_requests_that_name_nothing():
    result = engine_from(mig_policy(default="1g.20gb")).mutate(pod())
    assert limits(result)["requests"] == {"nvidia.com/mig-1g.20gb": "1"}


def test_without_any_profile_source_the_whole_gpu_stays():
    result = engine_from(mig_policy()).mutate(pod())
    assert limits(result)["limits"] == {"nvidia.com/gpu": 1}


def test_requests_only_gpu_becomes_equal_requests_and_limits():
    result = engine_from(mig_policy(default="1g.10gb")).mutate(pod(gpu_container(where="requests")))
    assert limits(result) == {"requests": {"nvidia.com/mig-1g.10gb": "1"}, "limits": {"nvidia.com/mig-1g.10gb": "1"}}


def test_init_containers_are_rewritten_too():
    result = engine_from(mig_policy(default="1g.10gb")).mutate(pod(init=(gpu_container("warmup"),)))
    assert "nvidia.com/mig-1g.10gb" in limits(result, 0, init=True)["limits"]


def test_gpu_model_preference_order_picks_the_first_model_that_fits():
    engine = engine_from(mig_policy(models="[A100-40GB, H200-141GB]"))
    result = engine.mutate(pod(annotations={"gpu-memory": "60Gi"}))
    assert "nvidia.com/mig-3g.71gb" in limits(result)["limits"]


def test_the_gpu_model_annotation_targets_one_allowed_model():
    engine = engine_from(mig_policy(models="[A100-80GB, H200-141GB]"))
    result = engine.mutate(pod(annotations={"gpu-memory": "15Gi", "gpu-model": "H200-141GB"}))
    assert "nvidia.com/mig-1g.18gb" in limits(result)["limits"]


def test_memory_choice_skips_profiles_outside_allowed_profiles():
    engine = engine_from(mig_policy(allowed="[1g.10gb, 3g.40gb]"))
    result = engine.mutate(pod(annotations={"gpu-memory": "15Gi"}))
    assert "nvidia.com/mig-3g.40gb" in limits(result)["limits"]


def test_memory_choice_never_picks_media_extension_profiles():
    result = engine_from(mig_policy()).mutate(pod(annotations={"gpu-memory": "5Gi"}))
    assert "nvidia.com/mig-1g.10gb" in limits(result)["limits"]


def test_media_extension_profiles_are_used_when_named():
    result = engine_from(mig_policy()).mutate(pod(annotations={"mig-profile": "1g.10gb+me"}))
    assert "nvidia.com/mig-1g.10gb.me" in limits(result)["limits"]


UNSERVABLE = [
    ({"mig-profile": "1g.5gb"}, "", "unknown MIG profile '1g.5gb' on A100-80GB"),
    ({"mig-profile": "3g.40gb"}, "allowed: [1g.10gb]", "not allowed"),
    ({"gpu-memory": "100Gi"}, "", "has 100Gi of memory"),
    ({"gpu-memory": "lots"}, "", "not a Kubernetes quantity"),
    ({"gpu-model": "H100-80G", "gpu-memory": "1Gi"}, "", "closest: H100-80GB"),
    ({"gpu-model": "H200-141GB", "gpu-memory": "1Gi"}, "", "not allowed here"),
]


@pytest.mark.parametrize(
    "annotations, extra, reason",
    UNSERVABLE,
    ids=[
        "profile-the-model-lacks",
        "profile-not-allowed",
        "memory-no-profile-covers",
        "bad-memory",
        "unknown-model",
        "model-not-allowed",
    ],
)
def test_a_request_that_cannot_be_served_is_left_alone_and_reported(annotations, extra, reason):
    allowed = extra.split(": ")[1] if extra else ""
    result = engine_from(mig_policy(allowed=allowed)).mutate(pod(annotations=annotations))
    assert limits(result)["limits"] == {"nvidia.com/gpu": 1}
    assert any(reason in str(p) for p in result.problems), result.problems
    assert all("policy gpu" in str(p) and "spec.containers[0].resources" in str(p) for p in result.problems)


def test_several_gpus_with_a_slice_asked_are_never_turned_into_several_slices():
    result = engine_from(mig_policy()).mutate(pod(gpu_container(gpus=2), annotations={"mig-profile": "1g.10gb"}))
    assert limits(result)["limits"] == {"nvidia.com/gpu": 2}
    assert "only one MIG device" in str(result.problems[0])


def test_several_gpus_keep_whole_gpus_with_a_warning_by_default():
    result = engine_from(mig_policy(default="1g.10gb")).mutate(pod(gpu_container(gpus=4)))
    assert limits(result)["limits"] == {"nvidia.com/gpu": 4}
    assert not result.problems
    assert any("keeps 4 whole GPUs" in w for w in result.warnings)


def test_several_gpus_are_denied_when_the_policy_says_so():
    result = engine_from(mig_policy(default="1g.10gb", extra="multiGpu: deny")).mutate(pod(gpu_container(gpus=4)))
    assert "asks for 4 whole GPUs" in str(result.problems[0])


def test_unequal_gpu_requests_and_limits_are_reported():
    container = {"name": "main", "resources": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}}
    result = engine_from(mig_policy(default="1g.10gb")).mutate(pod(container))
    assert "must equal limits" in str(result.problems[0])


def test_containers_already_on_mig_and_non_gpu_containers_are_left_alone():
    mig = {"name": "m", "resources": {"limits": {"nvidia.com/mig-2g.20gb": 1}}}
    original = pod(mig, plain_container())
    result = engine_from(mig_policy(default="1g.10gb")).mutate(original)
    assert result.object["spec"]["containers"] == original["spec"]["containers"]


def test_non_gpu_pods_are_not_touched_at_all():
    original = pod(plain_container())
    result = engine_from(mig_policy(default="1g.10gb")).mutate(original)
    assert result.object is original and not result.changes


@pytest.mark.parametrize(
    "username, groups, skipped",
    [("system:node:gpu-1", ("system:nodes",), True), ("alice", ("dev",), False), ("system:node:x", (), False)],
    ids=["kubelet", "user", "node-name-without-the-nodes-group"],
)
def test_mirror_pods_are_not_mutated_when_a_kubelet_makes_them_and_the_annotation_alone_skips_nothing(
    username, groups, skipped
):
    original = pod(annotations={"kubernetes.io/config.mirror": "abc"})
    request = RequestInfo(namespace="ml", username=username, groups=groups)
    result = engine_from(mig_policy(default="1g.10gb")).mutate(original, request)
    assert (result.object is original) is skipped


SINGLE_CASES = [
    (
        "A100-40GB",
        "1g.5gb",
        [
            "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            "NVIDIA-A100-PCIE-40GB-MIG-1g.5gb",
            "NVIDIA-A800-40GB-Active-MIG-1g.5gb",
        ],
    ),
    (
        "A100-80GB",
        "1g.10gb+me",
        [
            f"NVIDIA-{n}-MIG-1g.10gb.me"
            for n in ("A100-SXM4-80GB", "A100-80GB-PCIe", "A800-SXM4-80GB", "A800-80GB-PCIe")
        ],
    ),
    ("H200-141GB", "1g.18gb", ["NVIDIA-H200-MIG-1g.18gb", "NVIDIA-H200-NVL-MIG-1g.18gb"]),
    ("B200-180GB", "3g.90gb", ["NVIDIA-B200-MIG-3g.90gb"]),
]


@pytest.mark.parametrize("model, profile, labels", SINGLE_CASES, ids=[c[0] for c in SINGLE_CASES])
def test_single_strategy_keeps_nvidia_gpu_and_steers_to_mig_nodes(model, profile, labels):
    result = engine_from(mig_policy(models=f"[{model}]", strategy="single")).mutate(
        pod(annotations={"mig-profile": profile})
    )
    assert limits(result)["limits"] == {"nvidia.com/gpu": 1}
    spec = result.object["spec"]
    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expression = required["nodeSelectorTerms"][0]["matchExpressions"][0]
    exclusive = labels + [label.removeprefix("NVIDIA-") for label in labels]  # drivers before R470 too
    shared = [f"{label}-SHARED" for label in exclusive]  # time-sliced nodes of the same split
    assert expression == {"key": "nvidia.com/gpu.product", "operator": "In", "values": exclusive + shared}


def test_single_strategy_adds_the_product_requirement_to_every_existing_affinity_term():
    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}, {"matchFields": []}]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    result = engine_from(mig_policy(models="[A100-80GB]", strategy="single", default="1g.10gb")).mutate(
        pod(affinity=affinity)
    )
    out = result.object["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert all(any(e["key"] == "nvidia.com/gpu.product" for e in t["matchExpressions"]) for t in out)
    assert out[0]["matchExpressions"][0]["key"] == "zone"


def test_single_strategy_keeps_the_pods_own_node_selector_and_adds_the_products_beside_it():
    result = engine_from(mig_policy(models="[B200-180GB]", strategy="single", default="3g.90gb")).mutate(
        pod(nodeSelector={"zone": "a"})
    )
    spec = result.object["spec"]
    assert spec["nodeSelector"] == {"zone": "a"}
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [
        {
            "key": "nvidia.com/gpu.product",
            "operator": "In",
            "values": [
                "NVIDIA-B200-MIG-3g.90gb",
                "B200-MIG-3g.90gb",
                "NVIDIA-B200-MIG-3g.90gb-SHARED",
                "B200-MIG-3g.90gb-SHARED",
            ],
        }
    ]


@pytest.mark.parametrize(
    "affinity",
    [
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
        {"podAntiAffinity": {}},
    ],
    ids=["no-terms-yet", "no-node-selector-terms", "other-affinity-only"],
)
def test_single_strategy_creates_the_product_term_beside_what_affinity_already_has(affinity):
    result = engine_from(mig_policy(models="[A100-80GB]", strategy="single", default="1g.10gb")).mutate(
        pod(affinity=affinity)
    )
    required = result.object["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [e["key"] for e in required["nodeSelectorTerms"][0]["matchExpressions"]] == ["nvidia.com/gpu.product"]


def test_single_strategy_denies_containers_that_want_different_profiles():
    engine = engine_from(mig_policy(models="[B200-180GB]", strategy="single"))
    result = engine.mutate(
        pod(
            gpu_container("a"), gpu_container("b"), annotations={"mig-profile.a": "1g.23gb", "mig-profile.b": "2g.45gb"}
        )
    )
    assert "same way" in str(result.problems[0])


def test_single_strategy_reports_a_user_selector_for_another_product():
    engine = engine_from(mig_policy(models="[B200-180GB]", strategy="single", default="1g.23gb"))
    result = engine.mutate(pod(nodeSelector={"nvidia.com/gpu.product": "NVIDIA-B200"}))
    assert "selects NVIDIA-B200" in str(result.problems[0])


def test_the_highest_priority_matching_policy_decides_the_mig_rewrite():
    low = policy("low", "priority: 1\nmig:\n  gpuModels: [A100-80GB]\n  defaultProfile: 1g.10gb")
    high = policy(
        "high", "priority: 5\nmatch:\n  namespaces: [ml]\nmig:\n  gpuModels: [A100-80GB]\n  defaultProfile: 2g.20gb"
    )
    result = engine_from(low, high).mutate(pod())
    assert "nvidia.com/mig-2g.20gb" in limits(result)["limits"]
    assert "policy high" in str(result.changes[0])
