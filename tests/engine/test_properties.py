"""Properties over random GPU pods: the patch applies, requests equal limits, a second pass is empty,
and the patched Pod survives the kubernetes client's V1Pod model with no field lost."""

import copy
from fractions import Fraction

import jsonpatch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from policies.judge.quota import check_quota
from policies.judge.usage import Usage
from policies.model.policy import GPUPolicy, Limits, Quota, Source
from policies.review.request import RequestInfo
from tests.support.builders import as_v1pod_and_back, engine_from, policy

ENGINE = engine_from(
    policy(
        "mixed",
        """
match: {namespaces: ["ml-*"]}
mig: {gpuModels: [A100-80GB, H100-80GB], defaultProfile: 1g.10gb}
runtime:
  runtimeClassName: nvidia
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  env: {NVIDIA_DRIVER_CAPABILITIES: "compute,utility"}
  shmSize: 1Gi
triton: {modelRepository: "s3://models", profile: 1g.10gb}
""",
    ),
    policy(
        "single",
        """
match: {namespaces: [single]}
mig: {strategy: single, gpuModels: [H200-141GB, B200-180GB], defaultProfile: 1g.18gb}
runtime: {nodeSelector: {pool: gpu}}
""",
    ),
)

# The API server sends quantities as strings, as V1Pod models them.
gpu_amount = st.sampled_from(["1", "2", "3"])
resources = st.fixed_dictionaries(
    {},
    optional={
        "limits": st.dictionaries(
            st.sampled_from(["nvidia.com/gpu", "cpu", "memory", "nvidia.com/mig-2g.20gb"]), gpu_amount, max_size=3
        ),
        "requests": st.dictionaries(st.sampled_from(["nvidia.com/gpu", "cpu"]), st.just("1"), max_size=2),
    },
)


@st.composite
def containers(draw, prefix):
    count = draw(st.integers(min_value=0 if prefix == "init" else 1, max_value=3))
    result = []
    for i in range(count):
        container = {"name": f"{prefix}{i}", "image": "cuda:12"}
        res = draw(resources)
        gpu = res.get("limits", {}).get("nvidia.com/gpu")
        if gpu is not None and "nvidia.com/gpu" in res.get("requests", {}):
            res["requests"]["nvidia.com/gpu"] = gpu
        if res:
            container["resources"] = res
        if draw(st.booleans()):
            container["env"] = [{"name": draw(st.sampled_from(["A", "NVIDIA_DRIVER_CAPABILITIES"])), "value": "x"}]
        if draw(st.booleans()):
            container["volumeMounts"] = [{"name": "dshm", "mountPath": draw(st.sampled_from(["/dev/shm", "/data"]))}]
        result.append(container)
    return result


annotations = st.dictionaries(
    st.sampled_from(
        [
            "gpu-admission.io/mig-profile",
            "gpu-admission.io/gpu-memory",
            "gpu-admission.io/triton",
            "gpu-admission.io/gpu-model",
            "gpu-admission.io/mig-profile.main0",
        ]
    ),
    st.sampled_from(["1g.10gb", "3g.40gb", "1g.18gb", "15Gi", "200Gi", "inject", "H100-80GB", "B200-180GB", "bogus"]),
    max_size=4,
)


existing_spec = st.fixed_dictionaries(
    {},
    optional={
        "nodeSelector": st.sampled_from(
            [{"pool": "gpu"}, {"nvidia.com/gpu.product": "NVIDIA-H200-MIG-1g.18gb"}, {"zone": "a"}, {}]
        ),
        "affinity": st.sampled_from(
            [
                {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                            ]
                        }
                    }
                },
                {"podAntiAffinity": {}},
            ]
        ),
        "volumes": st.sampled_from([[{"name": "dshm", "emptyDir": {"medium": "Memory"}}], [{"name": "data"}], []]),
        "runtimeClassName": st.sampled_from(["nvidia", "kata"]),
    },
)


@st.composite
def pods(draw):
    spec = {"containers": draw(containers("main"))}
    init = draw(containers("init"))
    if init:
        spec["initContainers"] = init
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # What the pod may already carry where the writers write: each is a different patch operation.
    for key, value in draw(existing_spec).items():
        spec[key] = value
    metadata = {"name": "p", "namespace": draw(st.sampled_from(["ml-a", "single", "other"]))}
    chosen = draw(annotations)
    if chosen:
        metadata["annotations"] = chosen
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(pods())
def test_the_patch_applies_cleanly_and_yields_the_mutated_pod(raw):
    sent = copy.deepcopy(raw)
    result = ENGINE.mutate(raw)
    assert raw == sent, "the object as sent is never modified"
    patched = jsonpatch.apply_patch(raw, list(result.patch))
    assert patched == result.object


@SETTINGS
@given(pods())
def test_mig_requests_always_equal_limits(raw):
    result = ENGINE.mutate(raw)
    for container in result.object["spec"]["containers"] + result.object["spec"].get("initContainers", []):
        res = container.get("resources", {})
        for name, amount in res.get("limits", {}).items():
            if name.startswith("nvidia.com/mig-") and name in res.get("requests", {}):
                assert str(res["requests"][name]) == str(amount)
        changed_here = [c for c in result.changes if "nvidia.com/mig-" in c.what]
        for change in changed_here:
            assert "nvidia.com/gpu ->" in change.what


# Found by this law: a Triton sidecar's slice, the pod's only GPU, was pinned to the policy's
# models on the first pass and to the gpu-model annotation's only on the second.
SIDECAR_ONLY_GPU = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "ml-a",
        "annotations": {
            "gpu-admission.io/triton": "inject",
            "gpu-admission.io/mig-profile": "1g.10gb",
            "gpu-admission.io/gpu-model": "H100-80GB",
        },
    },
    "spec": {"containers": [{"name": "main0", "image": "cuda:12"}]},
}


@SETTINGS
@given(pods())
@example(SIDECAR_ONLY_GPU)
def test_a_second_pass_over_its_own_output_returns_no_patch(raw):
    first = ENGINE.mutate(raw)
    second = ENGINE.mutate(first.object)
    assert second.patch == ()
    assert second.object == first.object
    assert not second.changes


@SETTINGS
@given(pods())
def test_the_patched_pod_round_trips_through_v1pod_with_no_field_lost(raw):
    result = ENGINE.mutate(raw)
    assert as_v1pod_and_back(result.object) == _normalised(result.object)


def _normalised(value):
    """V1Pod serializes quantities as strings; everything else must come back as it went in."""
    if isinstance(value, dict):
        return {k: _normalised(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    return value


amounts = st.fractions(min_value=0, max_value=50, max_denominator=60)


ZEROS = st.sampled_from([Fraction(0), Usage().gpu_equivalents])  # another zero, and the shared one


@given(a=st.tuples(amounts, amounts), b=st.tuples(amounts, amounts), zero=ZEROS)
def test_usage_sums_and_differences_are_the_amounts_own(a, b, zero):
    """Usage answers zeros and cancelling amounts from their ratios: it must say what Fractions say,
    whichever zero it is given (the shared one, or another)."""
    first, second = Usage(a[0] or zero, {}, 0, 1, a[1] or zero), Usage(b[0] or zero, {}, 0, 1, b[1])
    for made, owned, shared in (
        (first + second, a[0] + b[0], a[1] + b[1]),
        (first - second, a[0] - b[0], a[1] - b[1]),
        (first - first, Fraction(0), Fraction(0)),
        ((first + second) - second, a[0], a[1]),
    ):
        assert (made.gpu_equivalents, made.shared_equivalents) == (owned, shared)
        assert made.owned_ratio == owned.as_integer_ratio() and made.shared_ratio == shared.as_integer_ratio()


@given(used=amounts, asked=amounts, limit=amounts, pods_used=st.integers(0, 40), pods_limit=st.integers(0, 40))
def test_a_quota_denies_exactly_what_fraction_arithmetic_puts_over_the_limit_and_warns_from_four_fifths(
    used, asked, limit, pods_used, pods_limit
):
    """check_quota compares integer ratios, cross-multiplied: it must say what Fractions say."""
    quota = Quota(limits=Limits(gpu_equivalents=limit, pods=pods_limit), per_pod=Limits(gpu_equivalents=limit))
    owner = GPUPolicy(name="p", source=Source("p.yaml", 1), quota=quota)
    pod, current = Usage(asked, {}, 0, 1), Usage(used, {}, 0, pods_used)
    rules = {(v.rule, v.action.value) for v in check_quota(owner, quota, "ns", pod, current)}
    expected = set()
    if asked > limit:
        expected.add(("quota.perPod.gpuEquivalents", "deny"))
    for rule, after, bound, wants in (
        ("quota.gpuEquivalents", used + asked, limit, asked > 0),
        ("quota.pods", Fraction(pods_used + 1), Fraction(pods_limit), True),
    ):
        if not wants:
            continue
        if after > bound:
            expected.add((rule, "deny"))
        elif bound > 0 and after >= bound * Fraction(4, 5):
            expected.add((rule, "warn"))
    assert rules == expected


class _Held:
    """What a scope holds now: `gpus` whole GPUs over `pods` pods, for every policy."""

    def __init__(self, gpus: int, pods: int) -> None:
        self.held = Usage(Fraction(gpus), {}, gpus, pods)

    def usage(self, policy, scope):
        return self.held

    def shared_claims(self, policy, scope):
        return ()


@settings(max_examples=200, deadline=None)
@given(
    held=st.integers(0, 12),
    each=st.integers(0, 3),
    limit=st.integers(0, 16),
    was=st.integers(0, 8),
    now=st.integers(0, 12),
    replicas_field=st.sampled_from(["Deployment", "LeaderWorkerSet"]),
)
def test_a_scale_the_webhook_allows_never_takes_a_budget_past_its_limit(held, each, limit, was, now, replicas_field):
    """The law at `kubectl scale`: what is held plus every pod the scale-up adds stays within the
    budget whenever the scale is allowed, and a scale-down or no change is always allowed."""
    engine = engine_from(policy("budget", f"match: {{namespaces: [ml]}}\nquota: {{limits: {{gpus: {limit}}}}}"))
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": each}}}
    template = {"spec": {"containers": [container]}}
    if replicas_field == "Deployment":
        workload = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": was, "template": template}}
        per_replica = 1
    else:
        group = {"size": 2, "workerTemplate": template}
        workload = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                    "spec": {"replicas": was, "leaderWorkerTemplate": group}}  # fmt: skip
        per_replica = 2
    workload["metadata"] = {"name": "w", "namespace": "ml"}
    decision = engine.validate_scale(workload, was, now, _Held(held, held), RequestInfo(namespace="ml"))
    added = max(now - was, 0) * per_replica
    overrun = added > 0 and each > 0 and held + added * each > limit
    assert decision.allowed is not overrun  # what runs already is never counted twice
