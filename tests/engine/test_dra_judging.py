"""GPUs held through DRA, judged as GPU requests are: a request is charged what its DeviceClass
(and its own selectors) can select, whatever the class is called; extended resources a class
serves are charged the same; `allowedProfiles`, `gpuModels` and `multiGpu` hold for claims; the
guardrails (adminAccess, device taints, opaque configuration, allowed classes) deny unless a policy
allows them; and ResourceClaims and templates are judged at their own creation."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from policies.gpu.claims import claim_demand, with_allocation
from policies.gpu.device_classes import NVIDIA_CLASSES, DeviceClasses, read_device_class, read_expression
from policies.judge.quota import NoUsage
from policies.review.cluster import KnownCluster
from policies.review.request import Operation, RequestInfo
from tests.support.builders import engine_from, pod, policy
from tests.support.dra import claim, claim_pod, claim_spec, cluster, device_class, exactly, mig_profile, nvidia

BUDGET = policy("budget", 'match: {namespaces: [ml]}\nquota: {limits: {gpuEquivalents: "8"}}')


@pytest.mark.parametrize(
    "device, expected",
    [
        pytest.param(exactly("h100.example.com", 2), Fraction(2), id="an-admins-class-selecting-nvidia-gpus"),
        pytest.param(
            exactly("mig-1g-12gb.gpu.nvidia.com"), Fraction(1, 7), id="nvidias-per-profile-class-charges-its-slice"
        ),
        pytest.param(exactly("nic.example.com", 8), Fraction(0), id="a-class-of-another-drivers-devices"),
        pytest.param(exactly("made-later.example.com", 3), Fraction(3), id="a-class-not-made-yet-may-select-any-gpu"),
        pytest.param(
            exactly("gpu.nvidia.com", 1, "device.driver == 'nic.example.com'"),
            Fraction(0),
            id="a-request-whose-selector-rules-gpus-out",
        ),
    ],
)
def test_a_claim_is_charged_what_its_class_can_select_whatever_the_class_is_called(device, expected):
    engine = engine_from(BUDGET)
    state = cluster(claim("c", "ml", claim_spec(device)))
    decision = engine.validate(claim_pod("c"), NoUsage(), cluster=state)
    assert decision.allowed, decision.message
    assert decision.usage.gpu_equivalents == expected


@pytest.mark.parametrize(
    "resource",
    ["example.com/h100", "deviceclass.resource.kubernetes.io/served.example.com"],
    ids=["extended-resource-name", "implicit-class-name"],
)
def test_an_extended_resource_a_class_serves_is_charged_what_the_class_can_select(resource):
    engine = engine_from(policy("cap", 'match: {namespaces: [ml]}\nquota: {perPod: {gpuEquivalents: "1"}}'))
    container = {"name": "main", "image": "cuda", "resources": {"limits": {resource: 2}}}
    decision = engine.validate(pod(container), NoUsage(), cluster=cluster())
    assert not decision.allowed
    assert "gpuEquivalents 2, over the per-pod cap of 1" in decision.message


def test_an_extended_resource_no_class_serves_is_not_charged():
    engine = engine_from(BUDGET)
    container = {"name": "main", "image": "nic", "resources": {"limits": {"example.com/nic": 4}}}
    decision = engine.validate(pod(container), NoUsage(), cluster=cluster())
    assert decision.allowed and decision.usage.gpu_equivalents == 0
    mutated = engine.mutate(pod(container), cluster=cluster())
    assert not mutated.changes  # nothing to rewrite, no runtime settings for a NIC


MIG_POLICY = policy(
    "mig",
    """
    match: {namespaces: [ml]}
    mig:
      gpuModels: [A100-80GB]
      allowedProfiles: [1g.10gb, 2g.20gb, 3g.40gb]
      multiGpu: deny
    """,
)


@pytest.mark.parametrize(
    "device, refusal",
    [
        pytest.param(
            exactly("mig.nvidia.com", 1, nvidia("profile", "7g.80gb")),
            "profile 7g.80gb is not allowed (allowed: 1g.10gb, 2g.20gb, 3g.40gb)",
            id="a-profile-the-policy-does-not-allow",
        ),
        pytest.param(
            exactly("mig-7g-80gb.gpu.nvidia.com"),
            "profile 7g.80gb is not allowed",
            id="pinned-by-the-class-not-the-claim",
        ),
        pytest.param(
            exactly("mig.nvidia.com", 1, nvidia("profile", "1g.5gb")),
            "profile 1g.5gb is not allowed",
            id="an-a100-40gb-profile",
        ),
        pytest.param(
            exactly("mig.nvidia.com"), "may be met by a MIG device of any profile", id="a-mig-device-of-any-profile"
        ),
        pytest.param(
            exactly("gpu.nvidia.com", 2), "asks for 2 devices; the policy allows one", id="two-gpus-under-multigpu-deny"
        ),
    ],
)
def test_the_mig_section_holds_for_claims_at_pod_admission_and_at_the_claims_creation(device, refusal):
    engine = engine_from(MIG_POLICY)
    made = claim("c", "ml", claim_spec(device))
    at_creation = engine.validate(made, NoUsage(), cluster=cluster())
    assert not at_creation.allowed and refusal in at_creation.message
    assert "spec.devices.requests[0].exactly" in at_creation.message
    by_pod = engine.validate(claim_pod("c"), NoUsage(), cluster=cluster(made))
    assert not by_pod.allowed and refusal in by_pod.message
    assert "ResourceClaim c spec.devices.requests[0].exactly" in by_pod.message


def test_gpu_models_hold_for_a_profile_only_other_models_have():
    engine = engine_from(policy("a100", "match: {namespaces: [ml]}\nmig: {gpuModels: [A100-80GB]}"))
    made = claim("c", "ml", claim_spec(exactly("mig.nvidia.com", 1, nvidia("profile", "1g.5gb"))))
    decision = engine.validate(made, NoUsage(), cluster=cluster())
    assert not decision.allowed and "profile 1g.5gb is not a profile of A100-80GB" in decision.message


def test_a_first_available_list_is_refused_for_any_alternative_the_policy_refuses():
    engine = engine_from(MIG_POLICY)
    ladder = {
        "firstAvailable": [
            {"name": "small", **exactly("mig.nvidia.com", 1, nvidia("profile", "1g.10gb"))},
            {"name": "big", **exactly("mig.nvidia.com", 1, nvidia("profile", "7g.80gb"))},
        ]
    }
    decision = engine.validate(claim("c", "ml", claim_spec(ladder)), NoUsage(), cluster=cluster())
    assert not decision.allowed
    assert "spec.devices.requests[0].firstAvailable[1]" in decision.message and "7g.80gb" in decision.message


def test_an_allowed_claim_passes_at_its_creation():
    engine = engine_from(MIG_POLICY)
    made = claim("c", "ml", claim_spec(exactly("mig.nvidia.com", 1, mig_profile("2g.20gb"))), template=True)
    assert engine.validate(made, NoUsage(), cluster=cluster()).allowed


@pytest.mark.parametrize(
    "spec, check, refusal",
    [
        pytest.param(
            claim_spec(exactly("gpu.nvidia.com", 1, adminAccess=True)),
            "draAdminAccess",
            "asks adminAccess",
            id="admin-access",
        ),
        pytest.param(
            claim_spec(exactly("gpu.nvidia.com", 1, tolerations=[{"key": "drain", "operator": "Exists"}])),
            "draDeviceTaints",
            "tolerates device taints",
            id="device-taint-tolerations",
        ),
        pytest.param(
            claim_spec(
                exactly("gpu.nvidia.com"),
                config=[{"requests": ["r0"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {}}}],
            ),
            "draOpaqueConfig",
            "opaque driver configuration",
            id="opaque-configuration",
        ),
    ],
)
def test_a_guardrail_denies_unless_the_policy_allows_it(spec, check, refusal):
    made = claim("c", "ml", spec)
    denied = engine_from(BUDGET).validate(made, NoUsage(), cluster=cluster())
    assert not denied.allowed and refusal in denied.message and f"security.{check}" in denied.message
    allowing = policy("open", f"match: {{namespaces: [ml]}}\nsecurity: {{allow: [{check}]}}")
    assert engine_from(allowing).validate(made, NoUsage(), cluster=cluster()).allowed


def test_a_guardrail_of_another_drivers_request_is_not_ours_to_judge():
    made = claim("c", "ml", claim_spec(exactly("nic.example.com", 1, adminAccess=True)))
    assert engine_from(BUDGET).validate(made, NoUsage(), cluster=cluster()).allowed


def test_only_the_classes_a_policy_allows_may_be_named_and_a_team_may_narrow_them():
    platform = policy(
        "platform", "match: {namespaces: [ml]}\nsecurity: {deviceClasses: [gpu.nvidia.com, mig.nvidia.com]}"
    )
    engine = engine_from(platform)
    assert engine.validate(claim("c", "ml", claim_spec(exactly("gpu.nvidia.com"))), NoUsage()).allowed
    denied = engine.validate(claim("c", "ml", claim_spec(exactly("h100.example.com"))), NoUsage(), cluster=cluster())
    assert not denied.allowed
    assert "device class h100.example.com is not allowed (allowed: gpu.nvidia.com, mig.nvidia.com)" in denied.message
    assert "spec.devices.requests[0].exactly.deviceClassName" in denied.message


def test_a_claim_over_a_per_pod_cap_or_a_whole_budget_is_refused_at_its_creation():
    capped = policy("cap", 'match: {namespaces: [ml]}\nquota: {perPod: {gpuEquivalents: "1"}, limits: {gpus: 2}}')
    engine = engine_from(capped)
    four = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", 4)), template=True)
    decision = engine.validate(four, NoUsage(), cluster=cluster())
    assert not decision.allowed
    assert "a pod naming this claim would hold gpuEquivalents 4, over the per-pod cap of 1" in decision.message
    assert "by itself: ml: gpus 0 + 4 exceeds 2" in decision.message
    assert "ResourceClaimTemplate ml/c" in decision.message
    one = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", 1)))
    assert engine.validate(one, NoUsage(), cluster=cluster()).allowed


def test_a_claim_for_every_device_is_refused_where_a_budget_holds():
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", allocationMode="All")))
    decision = engine_from(BUDGET).validate(made, NoUsage(), cluster=cluster())
    assert not decision.allowed and "allocationMode All" in decision.message


def test_a_claim_in_a_namespace_no_policy_reaches_is_allowed():
    made = claim("c", "elsewhere", claim_spec(exactly("gpu.nvidia.com", 8, adminAccess=True)))
    assert engine_from(BUDGET).validate(made, NoUsage(), cluster=cluster()).allowed


def test_policies_that_pick_pods_by_label_judge_the_claim_when_such_a_pod_names_it():
    picky = policy("picky", "match: {namespaces: [ml], podSelector: {matchLabels: {team: a}}}\nmig: {multiGpu: deny}")
    engine = engine_from(picky)
    made = claim("c", "ml", claim_spec(exactly("gpu.nvidia.com", 2)))
    assert engine.validate(made, NoUsage(), cluster=cluster()).allowed
    named = claim_pod("c")
    named["metadata"]["labels"] = {"team": "a"}
    assert not engine.validate(named, NoUsage(), cluster=cluster(made)).allowed


# One comparison of productName, true for every GPU: the driver term is inside a string literal.
HIDDEN_DRIVER_TERM = 'device.attributes["gpu.nvidia.com"].productName != "x && device.driver == \'nic.example.com"'


@pytest.mark.parametrize(
    "expression, driver, kind, profile",
    [
        (mig_profile("1g.10gb"), "gpu.nvidia.com", "mig", "1g.10gb"),
        ('device.driver == "gpu.nvidia.com"', "gpu.nvidia.com", None, None),
        ("device.driver == 'a' || device.driver == 'b'", None, None, None),
        ("!(device.driver == 'nic.example.com')", None, None, None),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", None, None, None),
        ("device.attributes['gpu.nvidia.com'].profile == '1g.10gb\\n[rule forged]'", None, None, None),
        ("device.driver == 'gpu.nvidi\\x61.com'", "gpu.nvidia.com", None, None),
        ("device.attributes['gpu.nvidia.com'].type == '\\147pu'", None, "gpu", None),
        (HIDDEN_DRIVER_TERM, None, None, None),
        ("'nic.example.com' == device.driver", "nic.example.com", None, None),
        ("device.attributes['gpu.nvidia.com']['profile'] in ['2g.20gb']", None, None, "2g.20gb"),
        ("cel.bind(d, device.driver, d == 'nic.example.com')", None, None, None),
        ("device.attributes['gpu.nvidia.com'].type in ['gpu', 'vfio']", None, None, None),
    ],
    ids=[
        "conjunction",
        "double-quotes",
        "a-disjunction-narrows-nothing",
        "a-negation-narrows-nothing",
        "other-terms",
        "an-escaped-line-break-is-not-read-so-never-quoted",
        "a-hex-escape-reads-as-the-scheduler-reads-it",
        "an-octal-escape-reads-as-the-scheduler-reads-it",
        "a-driver-term-inside-a-string-literal-is-no-term",
        "an-equality-either-way-round",
        "an-index-and-a-one-value-list",
        "a-binding-narrows-nothing",
        "a-list-of-several-narrows-nothing",
    ],
)
def test_a_selector_is_read_as_the_conjunction_of_the_terms_it_pins(expression, driver, kind, profile):
    selection = read_expression(expression)
    assert (selection.driver, selection.type, selection.profile) == (driver, kind, profile)


def test_nvidias_classes_are_known_before_the_cluster_says_and_collisions_name_the_winner():
    assert {c.name for c in NVIDIA_CLASSES} >= {"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"}
    older = device_class("old.example.com", "", "nvidia.com/gpu", "2026-01-01T00:00:00Z")
    newer = device_class("new.example.com", "", "nvidia.com/gpu", "2026-06-01T00:00:00Z")
    classes = DeviceClasses.of(read_device_class(c) for c in (older, newer))
    assert classes.collisions() == [("nvidia.com/gpu", ("new.example.com", "old.example.com"))]
    served = classes.serving("nvidia.com/gpu")
    assert served is not None and served.name == "new.example.com"


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


ADMIN = {"resource.kubernetes.io/admin-access": "true"}


def test_the_namespace_label_that_opens_admin_access_is_refused_unless_a_policy_allows_it():
    denied = engine_from(BUDGET).validate(namespace("ml", **ADMIN), NoUsage())
    assert not denied.allowed
    assert "security.draAdminAccess" in denied.message and "Namespace ml" in denied.message
    assert "metadata.labels.resource.kubernetes.io/admin-access" in denied.message
    allowing = policy("monitoring", "match: {namespaces: [ml]}\nsecurity: {allow: [draAdminAccess]}")
    assert engine_from(allowing).validate(namespace("ml", **ADMIN), NoUsage()).allowed
    assert engine_from(BUDGET).validate(namespace("elsewhere", **ADMIN), NoUsage()).allowed
    assert engine_from(BUDGET).validate(namespace("ml", team="a"), NoUsage()).allowed


def test_a_namespace_labelled_before_the_policy_may_still_be_edited_with_a_warning():
    before = namespace("ml", **ADMIN)
    after = namespace("ml", team="a", **ADMIN)
    request = RequestInfo(operation=Operation.UPDATE, old_object=before)
    decision = engine_from(BUDGET).validate(after, NoUsage(), request)
    assert decision.allowed and any("already so before this update" in w for w in decision.warnings)


def held(request: str, device: str) -> dict[str, str]:
    """One allocation result: `device` of the node's pool met `request` (no slice shows it here)."""
    return {"request": request, "driver": "gpu.nvidia.com", "pool": "node-1", "device": device}


LADDER = {
    "firstAvailable": [
        {"name": "big", **exactly("gpu.nvidia.com", 2)},
        {"name": "small", **exactly("mig.nvidia.com", 1, nvidia("profile", "1g.10gb"))},
    ]
}


@pytest.mark.parametrize(
    "status, expected",
    [
        (None, Fraction(2)),
        ({"allocation": {"devices": {"results": [held("r0/small", "mig-0")]}}}, Fraction(1, 7)),
        ({"allocation": {"devices": {"results": [held("r0/big", "gpu-0"), held("r0/big", "gpu-1")]}}}, Fraction(2)),
    ],
    ids=["before-allocation-the-worst-rung", "allocated-the-small-rung", "allocated-the-big-rung"],
)
def test_a_first_available_request_is_charged_its_worst_rung_until_the_allocation_trues_it_down(status, expected):
    made = claim("c", "ml", claim_spec(LADDER))
    demand = with_allocation(claim_demand(made["spec"]), status)
    state = KnownCluster(
        claims={("ml", False, "c"): demand}, knows_claims=True, device_classes=cluster().device_classes
    )
    decision = engine_from(BUDGET).validate(claim_pod("c"), NoUsage(), cluster=state)
    assert decision.usage.gpu_equivalents == expected
