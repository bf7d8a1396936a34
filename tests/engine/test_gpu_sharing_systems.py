"""Other GPU-sharing systems keep their pods: HAMi, time-slicing and MPS pods are not turned
into MIG slices, yet still count as GPU pods for rules and quotas."""

from fractions import Fraction

import pytest
import yaml

from policies.errors import InputError
from policies.gpu.catalog import CATALOG
from policies.judge.ledger import Ledger
from policies.judge.pod_facts import Needs, facts_of
from policies.judge.quota import NoUsage
from policies.judge.usage import Usage, pod_usage
from policies.review.pod import parse_pod
from tests.support.builders import engine_from, gpu_container, pod, policy

SLICES = policy(
    "slices",
    """
mig:
  gpuModels: [H100-80GB]
  defaultProfile: 1g.10gb
quota:
  limits: {gpuEquivalents: "1", pods: 5}
  perPod: {gpuEquivalents: "1"}
rules:
  - name: owner
    expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
    action: deny
""",
)


def usage_of(raw: dict) -> Usage:
    return pod_usage(parse_pod(raw), CATALOG)


def hami(**resources):
    return {"name": "a", "image": "x", "resources": {"limits": resources}}


@pytest.mark.parametrize(
    "sharing_pod, reason",
    [
        pytest.param(pod(hami(**{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000})), "HAMi", id="hami-gpumem"),
        pytest.param(pod(hami(**{"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30})), "HAMi", id="hami-gpucores"),
        pytest.param(pod(hami(**{"nvidia.com/gpu.shared": 1})), "time-sliced", id="renamed-shared-resource"),
        pytest.param(
            pod(gpu_container(), nodeSelector={"nvidia.com/gpu.sharing-strategy": "mps"}), "MPS", id="mps-node-selector"
        ),
        pytest.param(
            pod(gpu_container(), nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}),
            "time-sliced",
            id="shared-product-label",
        ),
    ],
)
def test_pods_of_another_sharing_system_are_not_rewritten_but_warned(sharing_pod, reason):
    result = engine_from(SLICES).mutate(sharing_pod)
    assert "nvidia.com/mig-" not in yaml.safe_dump(result.object)
    if "'nvidia.com/gpu'" in str(sharing_pod):  # a whole GPU the default profile would have taken
        assert any("not turned into a MIG slice" in w for w in result.warnings), result.warnings


def test_they_still_count_for_rules_and_quotas():
    engine = engine_from(SLICES)
    shared = engine.mutate(pod(gpu_container(gpus=2), nodeSelector={"nvidia.com/gpu.sharing-strategy": "mps"}))
    decision = engine.validate(shared.object, Ledger())
    assert not decision.allowed
    assert {v.rule for v in decision.verdicts} >= {"owner", "quota.perPod.gpuEquivalents"}


def test_a_gpu_pod_with_no_sharing_constraint_is_still_rewritten():
    result = engine_from(SLICES).mutate(pod(gpu_container()))
    assert "nvidia.com/mig-1g.10gb" in yaml.safe_dump(result.object)


@pytest.mark.parametrize(
    "resource, shared",
    [
        ("nvidia.com/GA100_A100_PCIE_40GB", False),
        ("nvidia.com/TU104GL_Tesla_T4", False),
        ("nvidia.com/GRID_T4-1Q", True),
    ],
    ids=["passthrough-a100", "passthrough-t4", "vgpu-t4-1q"],
)
def test_a_virtual_machines_gpu_is_a_gpu_charged_whole_or_as_a_share(resource, shared):
    launcher = pod({"name": "compute", "image": "virt-launcher", "resources": {"limits": {resource: 1}}})
    usage = usage_of(launcher)
    assert usage.gpus == 1
    assert usage.equivalents(Fraction(1, 2)) == (Fraction(1, 2) if shared else 1)
    engine = engine_from(policy("no-gpus", "quota: {limits: {gpus: 0}}"))
    assert not engine.validate(launcher, NoUsage()).allowed


@pytest.mark.parametrize(
    "resource, gpu",
    [
        ("deviceclass.resource.kubernetes.io/gpu.nvidia.com", True),
        ("deviceclass.resource.kubernetes.io/mig.nvidia.com", True),
        ("deviceclass.resource.kubernetes.io/compute-domain-default-channel.nvidia.com", False),
    ],
    ids=["dra-gpu", "dra-mig", "dra-channel"],
)
def test_a_dra_extended_resource_of_an_nvidia_gpu_class_is_charged_a_whole_gpu(resource, gpu):
    claimed = pod({"name": "main", "image": "cuda", "resources": {"limits": {resource: 2}}})
    usage = usage_of(claimed)
    assert (usage.gpus, usage.equivalents(1)) == ((2, 2) if gpu else (0, 0))
    engine = engine_from(policy("no-gpus", "quota: {limits: {gpus: 1}}"))
    assert engine.validate(claimed, NoUsage()).allowed is not gpu


@pytest.mark.parametrize(
    "annotations, charged",
    [
        ({"gpu-fraction": "0.5"}, "1/2"),
        ({"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}, "1/2"),
        ({"gpu-memory": "8192"}, "1"),
        # Run:ai's dynamic fractions: the limit is what the pod may burst to, so what it can get.
        ({"gpu-fraction": "0.25", "gpu-fraction-limit": "0.8"}, "4/5"),
        ({"gpu-fraction": "0.25", "gpu-fraction-limit": "0.8", "gpu-fraction-num-devices": "2"}, "8/5"),
        ({"gpu-fraction": "0.25", "gpu-memory-limit": "40Gi"}, "1"),
    ],
    ids=["half", "a-quarter-of-two", "memory", "dynamic-limit", "dynamic-limit-of-two", "dynamic-memory-limit"],
)
def test_a_kai_or_runai_share_by_annotation_is_a_gpu_pod_charged_what_it_asks(annotations, charged):
    shared = pod({"name": "main", "image": "vllm"}, schedulerName="kai-scheduler")
    shared["metadata"]["annotations"] = dict(annotations)  # KAI's keys have no prefix
    usage = usage_of(shared)
    assert usage.equivalents(Fraction(1)) == Fraction(charged) and usage.pods == 1
    engine = engine_from(policy("tiny", 'quota: {limits: {gpuEquivalents: "1/4"}}'))
    decision = engine.validate(shared, NoUsage())
    assert not decision.allowed and "gpuEquivalents" in decision.message
    assert engine.mutate(shared).object["spec"]["containers"][0] == {"name": "main", "image": "vllm"}
    # Running, it is counted by the pod watch as admitted (not taken for a pod holding nothing).
    running = facts_of(dict(shared, status={"phase": "Running"}), Needs())
    assert running is not None and running.usage.equivalents(Fraction(1)) == Fraction(charged)


@pytest.mark.parametrize("fraction", ["0", "1.5", "1e600000", "half"], ids=["zero", "over-one", "exponent", "words"])
@pytest.mark.parametrize("annotation", ["gpu-fraction", "gpu-fraction-limit"])
def test_a_fraction_that_is_none_is_refused_naming_the_annotation(fraction, annotation):
    asking = pod({"name": "main", "image": "x"})
    asking["metadata"]["annotations"] = {"gpu-fraction": "0.5", annotation: fraction}
    with pytest.raises(InputError) as raised:
        parse_pod(asking)
    assert raised.value.path == f"metadata.annotations.{annotation}"


@pytest.mark.parametrize(
    "resources, owned",
    [
        ({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30, "nvidia.com/gpumem": 3000}, False),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 25}, False),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 100, "nvidia.com/gpumem": 3000}, True),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100}, True),
        # No memory bound: HAMi's chart gives the container the whole device's memory.
        ({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30}, True),
    ],
    ids=["a-share", "a-memory-percentage", "all-the-cores", "all-the-memory", "cores-but-no-memory-bound"],
)
def test_a_hami_pod_asking_all_of_a_device_holds_it_outright(resources, owned):
    usage = usage_of(pod(hami(**resources)))
    assert usage.equivalents(Fraction(1, 2)) == (1 if owned else Fraction(1, 2))


def test_the_gpu_operators_passthrough_alias_is_a_whole_gpu_anywhere():
    """`nvidia.com/pgpu` (Kata and confidential-container nodes; NVIDIA's NIM sample asks for it)."""
    usage = usage_of(pod(hami(**{"nvidia.com/pgpu": 1})))
    assert usage.equivalents(Fraction(1, 2)) == 1 and usage.gpus == 1
