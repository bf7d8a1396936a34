"""Pods that hold GPUs through DRA claims are charged what the claims can allocate: read from the
ResourceClaim or ResourceClaimTemplate the pod names (resource.k8s.io v1, v1beta1), at admission
over HTTPS and while the pod runs (the replica's watches)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from policies.errors import InputError
from policies.gpu.claims import Resolved, claim_demand, resolve
from policies.gpu.device_classes import NVIDIA_CLASSES, DeviceClasses, read_device_class
from policies.gpu.device_reach import NO_DEVICES
from policies.gpu.dra_devices import ANY_MIG as ANY_PROFILE
from policies.gpu.dra_devices import WHOLE_GPU, DeviceKind
from policies.judge.ledger import Ledger
from policies.judge.quota import NoUsage
from policies.review.cluster import KnownCluster
from tests.support.builders import Calls, engine_from, plain_container, pod, policy
from tests.support.cluster import NS, Replica, start
from tests.support.kube_fake import FakeKube
from tests.support.server_harness import api_server, holder_of
from webhook.cluster.quota.counting.pod_counting import PodCounting

PROFILE_1G = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"


def exactly(device_class: str, count: int | None = None, mode: str | None = None, cel: str = "") -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": device_class}
    if count is not None:
        request["count"] = count
    if mode:
        request["allocationMode"] = mode
    if cel:
        request["selectors"] = [{"cel": {"expression": cel}}]
    return request


def spec(*requests: dict[str, Any]) -> dict[str, Any]:
    return {"devices": {"requests": [{"name": f"r{i}", **r} for i, r in enumerate(requests)]}}


GPU = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"


NIC_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "nic.example.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'nic.example.com'"}}]},
}
CLASSES = DeviceClasses.of([*NVIDIA_CLASSES, read_device_class(NIC_CLASS)])


def asks(*alternatives: tuple[str, int]) -> list[list[Resolved]]:
    """One request, met by any of `alternatives` (each a device no slice shows, and a count): a
    whole GPU, or a slice of the profile a MIG resource name says."""
    return [[Resolved((_kind(name),), count) for name, count in alternatives]]


def _kind(name: str) -> DeviceKind:
    if name.startswith("nvidia.com/mig-"):
        return DeviceKind("mig", None, name.removeprefix("nvidia.com/mig-"))
    return WHOLE_GPU


def resolved(claim: dict[str, Any]) -> list[list[Resolved]]:
    """Per request, what each of its alternatives can allocate under NVIDIA's classes and a NIC's,
    with no device shown (what the selectors prove)."""
    return [[resolve(a, CLASSES, NO_DEVICES) for a in r.alternatives] for r in claim_demand(claim).requests]


FIRST_AVAILABLE = {
    "firstAvailable": [
        {"name": "big", **exactly("gpu.nvidia.com", 2)},
        {"name": "small", **exactly("mig.nvidia.com", cel=PROFILE_1G)},
    ]
}
ANY_MIG = exactly("mig.nvidia.com", cel="device.attributes['gpu.nvidia.com'].productName != ''")


@pytest.mark.parametrize(
    "claim, demand",
    [
        pytest.param(spec({"exactly": exactly("gpu.nvidia.com")}), asks((GPU, 1)), id="one-gpu-by-default"),
        pytest.param(spec({"exactly": exactly("gpu.nvidia.com", 4)}), asks((GPU, 4)), id="a-count-of-gpus"),
        pytest.param(spec(exactly("gpu.nvidia.com", 2)), asks((GPU, 2)), id="v1beta1-fields-on-the-request"),
        pytest.param(
            spec({"exactly": exactly("mig.nvidia.com", 3, cel=PROFILE_1G)}),
            asks(("nvidia.com/mig-1g.10gb", 3)),
            id="mig-slices-pinned-by-profile",
        ),
        pytest.param(
            spec({"exactly": ANY_MIG}),
            [[Resolved((ANY_PROFILE,), 1)]],
            id="a-mig-device-of-any-profile-is-a-whole-gpus-worth",
        ),
        pytest.param(
            spec({"exactly": exactly("gpu.nvidia.com", mode="All")}),
            [[Resolved((WHOLE_GPU,), None)]],
            id="all-is-unbounded",
        ),
        pytest.param(
            spec({"exactly": exactly("nic.example.com", 8)}),
            [[Resolved((), 8)]],
            id="a-class-of-another-vendors-driver",
        ),
        pytest.param(
            spec({"exactly": exactly("h100.example.com", 2)}),
            [[Resolved((WHOLE_GPU,), 2)]],
            id="a-class-the-cluster-does-not-show-may-select-any-gpu",
        ),
        pytest.param(
            spec(FIRST_AVAILABLE),
            [[*asks((GPU, 2))[0], *asks(("nvidia.com/mig-1g.10gb", 1))[0]]],
            id="first-available-keeps-every-alternative",
        ),
        pytest.param({}, [], id="no-devices"),
    ],
)
def test_a_claims_spec_says_what_it_can_allocate_of_nvidias_gpus(claim, demand):
    assert resolved(claim) == demand


@pytest.mark.parametrize("count", [0, -1, "2", 1.5], ids=repr)
def test_a_count_that_is_no_whole_number_is_refused_with_its_path(count):
    with pytest.raises(InputError) as error:
        claim_demand(spec({"exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}))
    assert error.value.path == "spec.devices.requests[0].exactly.count"


def claim(name: str, namespace: str, body: dict[str, Any], template: bool = False) -> dict[str, Any]:
    kind = "ResourceClaimTemplate" if template else "ResourceClaim"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": body} if template else body,
    }


def claim_pod(namespace: str, *claims: tuple[str, bool], name: str = "p") -> dict[str, Any]:
    obj = pod(dict(plain_container(), resources={"claims": [{"name": "c0"}]}), namespace=namespace)
    key = {False: "resourceClaimName", True: "resourceClaimTemplateName"}
    obj["spec"]["resourceClaims"] = [{"name": f"c{i}", key[t]: n} for i, (n, t) in enumerate(claims)]
    obj["metadata"].update(name=name, uid=f"uid-{name}")
    return obj


POLICIES = [
    policy("two-gpus", 'match: {namespaces: [dra]}\nquota: {limits: {gpuEquivalents: "2"}}'),
    policy("per-pod", 'match: {namespaces: [dra-caps]}\nquota: {perPod: {gpuEquivalents: "1"}}'),
]
CLAIMS = [
    claim("four-gpus", "dra", spec({"exactly": exactly("gpu.nvidia.com", 4)}), template=True),
    claim("one-gpu", "dra", spec({"exactly": exactly("gpu.nvidia.com")}), template=True),
    claim("slices", "dra-caps", spec({"exactly": exactly("mig.nvidia.com", 8, cel=PROFILE_1G)})),
    claim("every-gpu", "dra", spec({"exactly": exactly("gpu.nvidia.com", mode="All")})),
    claim("a-nic", "dra", spec({"exactly": exactly("nic.example.com", 2)})),
]


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    holder = holder_of(engine_from(*POLICIES))
    for template in (False, True):
        holder.view.claims.lister(template)([c for c in CLAIMS if (c["kind"] == "ResourceClaimTemplate") is template])
    holder.view.device_class_cache.replace_all([NIC_CLASS])  # the cluster's classes: a NIC's driver's
    with api_server(holder, tmp_path_factory.mktemp("certs")) as server:
        yield server


@pytest.mark.parametrize(
    "obj, reason",
    [
        (claim_pod("dra", ("four-gpus", True)), "gpuEquivalents 0 + 4 exceeds 2"),
        (claim_pod("dra-caps", ("slices", False)), "gpuEquivalents 8/7, over the per-pod cap of 1"),
        (claim_pod("dra", ("every-gpu", False)), "allocationMode All"),
        (claim_pod("dra", ("no-such-claim", False)), "ResourceClaim no-such-claim not found: create it before the pod"),
    ],
    ids=[
        "a-template-of-four-gpus-over-a-budget-of-two",
        "eight-slices-over-a-cap-of-one-gpu",
        "all-devices",
        "a-claim-not-found",
    ],
)
def test_a_pod_holding_gpus_by_claim_is_judged_for_what_the_claim_can_allocate(api, obj, reason):
    allowed, _, response = api.create(obj)
    assert not allowed, response
    assert reason in response["status"]["message"]


@pytest.mark.parametrize(
    "obj",
    [claim_pod("dra", ("one-gpu", True)), claim_pod("dra", ("a-nic", False))],
    ids=["one-gpu-within-budget", "another-vendors-device"],
)
def test_a_pod_whose_claims_fit_is_admitted(api, obj):
    allowed, _, response = api.create(obj)
    assert allowed, response


def test_offline_a_claim_not_known_is_warned_of_not_denied():
    engine = engine_from(*POLICIES)
    decision = engine.validate(claim_pod("dra", ("elsewhere", False)), NoUsage())
    assert decision.allowed
    assert any("ResourceClaim elsewhere not known here: not charged" in w for w in decision.warnings)


def test_a_running_pods_claims_are_charged_and_a_template_made_again_charges_it_anew(
    kube: FakeKube, replicas, monkeypatch
):
    relists = Calls(monkeypatch, PodCounting, "replace_all")  # a remade template lists the pods again
    kube.put(NS, "budget", {"b.yaml": POLICIES[0]})
    kube.store("resourceclaimtemplates", claim("gpus", "dra", spec({"exactly": exactly("gpu.nvidia.com")}), True))
    running = claim_pod("dra", ("gpus", True), name="running")
    running["spec"]["nodeName"] = "node-1"
    kube.put_pod(running)
    replica: Replica = start(kube, replicas)
    found = replica.holder.engine.policy_set.by_name("two-gpus")
    assert replica.holder.budgets.usage(found, "dra").gpu_equivalents == Fraction(1)
    kube.delete("dra", "gpus", "resourceclaimtemplates")
    kube.store("resourceclaimtemplates", claim("gpus", "dra", spec({"exactly": exactly("gpu.nvidia.com", 2)}), True))
    assert relists.wait_for(lambda: replica.holder.budgets.usage(found, "dra").gpu_equivalents == 2)
    denied = replica.validate(claim_pod("dra", ("gpus", True), name="next"))
    assert not denied.allowed and "gpuEquivalents 2 + 2 exceeds 2" in denied.message


def test_an_api_server_without_dra_leaves_the_replica_ready_and_pods_naming_claims_warned_of(kube: FakeKube, replicas):
    kube.unserved |= {"resourceclaims", "resourceclaimtemplates", "deviceclasses"}
    kube.put(NS, "budget", {"b.yaml": POLICIES[0]})
    replica: Replica = start(kube, replicas)
    assert replica.holder.ready
    answer = replica.validate(claim_pod("dra", ("gpus", True)))
    assert answer.allowed and any("not known here" in w for w in answer.warnings)


def test_offline_a_running_pods_claims_are_charged_from_the_cluster_state():
    """The offline ledger (`validate --cluster-state`, `quota`) charges a running pod what its
    claims can allocate, as the replicas' watches do: it once read the pods without the claims
    the cluster state holds, and charged such a pod nothing."""
    engine = engine_from(*POLICIES)
    demand = claim_demand(CLAIMS[1]["spec"]["spec"])  # the template's claim spec
    cluster = KnownCluster(claims={("dra", True, "one-gpu"): demand}, knows_claims=True)
    running = claim_pod("dra", ("one-gpu", True), name="running")
    running["spec"]["nodeName"], running["status"] = "node-1", {"phase": "Running"}
    ledger = Ledger.from_pods([running], engine.policy_set, cluster)
    assert ledger.usage(engine.policy_set.by_name("two-gpus"), "dra").gpu_equivalents == 1


def test_a_running_pods_charge_is_the_claim_made_for_it_whatever_becomes_of_the_template(
    kube: FakeKube, replicas, monkeypatch
):
    """Deleting the template under a running pod once dropped the pod from its budget (a template a
    pod made the budget unlimited): the claim Kubernetes made for the pod is what it holds."""
    relists = Calls(monkeypatch, PodCounting, "replace_all")
    kube.put(NS, "budget", {"b.yaml": POLICIES[0]})
    one_gpu = spec({"exactly": exactly("gpu.nvidia.com")})
    kube.store("resourceclaimtemplates", claim("gpus", "dra", one_gpu, True))
    made = claim("running-c0-x7k2p", "dra", one_gpu)
    made["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "c0"}
    kube.store("resourceclaims", made)
    running = claim_pod("dra", ("gpus", True), name="running")
    running["spec"]["nodeName"] = "node-1"
    running["status"] = {
        "phase": "Running",
        "resourceClaimStatuses": [{"name": "c0", "resourceClaimName": "running-c0-x7k2p"}],
    }
    kube.put_pod(running)
    replica: Replica = start(kube, replicas)
    found = replica.holder.engine.policy_set.by_name("two-gpus")
    assert replica.holder.budgets.usage(found, "dra").gpu_equivalents == 1
    listed = relists.count
    kube.delete("dra", "gpus", "resourceclaimtemplates")
    assert relists.wait_for(lambda: relists.count > listed)  # the pods charged again
    assert replica.holder.budgets.usage(found, "dra").gpu_equivalents == 1
    listed = relists.count
    kube.store("resourceclaimtemplates", claim("gpus", "dra", spec({"exactly": exactly("gpu.nvidia.com", 8)}), True))
    assert relists.wait_for(lambda: relists.count > listed)
    assert replica.holder.budgets.usage(found, "dra").gpu_equivalents == 1
