"""Native MIG gates (policies.native.mig_gate): the MIG resources a container names, held to the
owning policy's `allowedProfiles` and `gpuModels` by ValidatingAdmissionPolicies. Judged here
with the engine's CEL (tests.support.native) beside the engine itself; the real API server
judges them in tests/e2e/test_native.py."""

from __future__ import annotations

import kubernetes_validate
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import KnownCluster, native_policies
from policies.gpu.catalog import CATALOG
from policies.judge.quota import NoUsage
from policies.model.cel import compile_expression
from policies.model.loader import load_texts
from policies.model.policy import MigSpec
from policies.model.selectors import parse_selector
from policies.native.matching import selector_condition
from policies.native.mig_gate import refused_resources
from tests.support.builders import engine_from, policy
from tests.support.native import cel_input, denials

K8S = kubernetes_validate.latest_version()
FIRST = policy(
    "first",
    """
    priority: 10
    match:
      namespaces: ["team-*"]
      podSelector: {matchExpressions: [{key: tier, operator: NotIn, values: [cpu]}]}
      namespaceSelector: {matchExpressions: [{key: env, operator: NotIn, values: [lab]}]}
      condition: "!has(object.metadata.annotations) || !('free' in object.metadata.annotations)"
    mig: {gpuModels: [A100-80GB], allowedProfiles: [1g.10gb, 2g.20gb, 3g.40gb]}
    """,
)
SECOND = policy("second", "mig: {gpuModels: [A100-40GB]}")  # refuses by model: no allowedProfiles
RULES_ONLY = policy("rules-only", "priority: 50\nrules: [{name: r, expression: 'true', message: m}]")
# Refused by both, by one, by none; a share of a refused profile; a name no GPU has; not MIG.
NAMES = [
    "nvidia.com/mig-1g.10gb",
    "nvidia.com/mig-2g.20gb.shared",
    "nvidia.com/mig-3g.40gb",
    "nvidia.com/mig-1g.5gb",
    "nvidia.com/mig-7g.80gb",
    "nvidia.com/mig-3g.20gb.shared",
    "nvidia.com/mig-9g.999gb",
    "nvidia.com/gpu",
    "cpu",
]


def generate(*documents: str) -> list[dict]:
    """The gates made of `documents` (the whole set: a gate reads the policies before it)."""
    result = load_texts([(f"p{i}.yaml", d) for i, d in enumerate(documents)])
    assert not result.problems, result.problems
    return [o for o in native_policies(result.policies).objects if o["metadata"]["name"].endswith(".mig")]


def engine_refusals(documents: tuple[str, ...], pod: dict, namespace: str, labels: dict[str, str]) -> list[str]:
    """The engine's verdicts of the kinds the gates hold: a named profile refused by the policy, a
    container asking for more than one MIG device."""
    cluster = KnownCluster(namespaces={namespace: {"kubernetes.io/metadata.name": namespace, **labels}})
    placed = {**pod, "metadata": {**pod["metadata"], "namespace": namespace}}
    decision = engine_from(*documents).validate(placed, NoUsage(), cluster=cluster)
    return [
        v.message
        for v in decision.verdicts
        if v.rule == "mig"
        and any(said in v.message for said in ("is not allowed", "is not a profile of", "MIG devices"))
    ]


def test_a_policy_with_mig_limits_gets_a_gate_bound_deny_with_its_selectors_valid_for_the_api_server():
    found = {(o["kind"], o["metadata"]["name"]): o for o in generate(FIRST, SECOND)}
    assert set(found) == {
        (kind, f"gpu-admission.{name}.mig")
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
        for name in ("first", "second")
    }
    binding = found["ValidatingAdmissionPolicyBinding", "gpu-admission.first.mig"]["spec"]
    assert binding["validationActions"] == ["Deny"]
    assert set(binding["matchResources"]) == {"objectSelector", "namespaceSelector"}
    for obj in found.values():
        kubernetes_validate.validate(obj, K8S, strict=True)


def test_refused_names_carry_the_engine_reason_and_their_shared_replicas_too():
    spec = MigSpec(allowed_profiles=frozenset({"1g.10gb", "3g.20gb"}), gpu_models=(CATALOG.model("A100-80GB"),))
    refused = refused_resources(spec, CATALOG)
    assert "nvidia.com/mig-1g.10gb" not in refused
    assert refused["nvidia.com/mig-2g.20gb"] == "profile 2g.20gb is not allowed (allowed: 1g.10gb, 3g.20gb)"
    assert refused["nvidia.com/mig-2g.20gb.shared"] == refused["nvidia.com/mig-2g.20gb"]
    assert refused["nvidia.com/mig-3g.20gb"] == "profile 3g.20gb is not a profile of A100-80GB"
    assert refused_resources(MigSpec(), CATALOG) == {}


def test_a_policy_allowing_every_profile_refuses_none_and_owns_the_pods_it_matches():
    everything = policy("everything", "priority: 20\nmatch: {namespaces: [team-a]}\nmig: {}")
    objects = generate(everything, SECOND)
    gate = objects[0]["spec"]
    assert objects[0]["metadata"]["name"] == "gpu-admission.everything.mig"
    assert [v["name"] for v in gate["variables"]] == ["containersDevices", "initContainersDevices"]
    pod = _pod([{"nvidia.com/mig-7g.80gb": "1"}], [], {})
    assert denials(objects, pod, "team-a") == engine_refusals((everything, SECOND), pod, "team-a", {}) == []
    assert denials(objects, pod, "ml") and engine_refusals((everything, SECOND), pod, "ml", {})


def test_one_mig_device_a_container_for_whichever_policy_owns_the_pod():
    pod = _pod(
        [{"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-2g.20gb": "1"}, {"nvidia.com/mig-1g.10gb": "2"}], [], {}
    )
    objects = generate(policy("everything", "mig: {}"))
    said = denials(objects, pod, "ml")
    assert said == ["a container asks for more than one MIG device (policy everything) [rule mig, spec.containers]"]
    assert [m for m in engine_refusals((policy("everything", "mig: {}"),), pod, "ml", {}) if "asks for 2 MIG" in m]


def test_policies_without_mig_shadow_no_gate():
    pod = _pod([{"nvidia.com/mig-7g.80gb": "1"}], [], {})
    objects = generate(RULES_ONLY, SECOND)
    assert denials(objects, pod, "ml") == [
        "a container names a MIG profile this policy refuses (policy second) [rule mig, spec.containers]"
    ]


def _pod(containers: list[dict[str, str]], init: list[dict[str, str]], labels: dict[str, str], **meta: object) -> dict:
    def container(index: int, amounts: dict[str, str], where: str) -> dict:
        resources = {where: amounts} if where != "both" else {"limits": amounts, "requests": dict(amounts)}
        return {"name": f"c{index}", "image": "cuda", "resources": resources}

    metadata: dict = {"name": "p", **meta}
    if labels:
        metadata["labels"] = labels
    spec: dict = {"containers": [container(i, a, "limits") for i, a in enumerate(containers)]}
    if init:
        spec["initContainers"] = [container(len(containers) + i, a, "requests") for i, a in enumerate(init)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


amounts = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(["0", "1", "2"]), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(
    containers=st.lists(amounts, min_size=1, max_size=3),
    init=st.lists(amounts, max_size=2),
    namespace=st.sampled_from(["team-a", "ml"]),
    namespace_labels=st.sampled_from([{}, {"env": "lab"}, {"env": "prod"}]),
    labels=st.sampled_from([{}, {"tier": "cpu"}, {"tier": "gpu"}]),
    free=st.booleans(),
)
def test_the_gates_refuse_exactly_what_the_engine_refuses_for_the_policy_that_owns_the_pod(
    containers, init, namespace, namespace_labels, labels, free
):
    """Which policy owns a pod turns on the namespace, both label sets and a condition; whichever
    does, the gates deny exactly where the engine refuses a named profile, and the first message
    of each gate is the engine's (with the engine's CEL, the path's index is the API server's)."""
    documents = (FIRST, SECOND, RULES_ONLY)
    pod = _pod(containers, init, labels, **({"annotations": {"free": "1"}} if free else {}))
    objects = generate(*documents)
    native = denials(objects, pod, namespace, namespace_labels)
    engine = engine_refusals(documents, pod, namespace, namespace_labels)
    assert bool(native) == bool(engine), (native, engine)
    owners = {message.split("(policy ")[1].split(")")[0] for message in native}
    assert owners == {message.split("(policy ")[1].split(")")[0] for message in engine}


selectors = st.fixed_dictionaries(
    {
        "matchLabels": st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["1", "2"]), max_size=1),
        "matchExpressions": st.lists(
            st.one_of(
                st.builds(
                    lambda k, op, vs: {"key": k, "operator": op, "values": vs},
                    st.sampled_from(["a", "b", "c"]),
                    st.sampled_from(["In", "NotIn"]),
                    st.lists(st.sampled_from(["1", "2", "3"]), min_size=1, max_size=2),
                ),
                st.builds(
                    lambda k, op: {"key": k, "operator": op},
                    st.sampled_from(["a", "b", "c"]),
                    st.sampled_from(["Exists", "DoesNotExist"]),
                ),
            ),
            max_size=3,
        ),
    }
)


@given(selectors, st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2", "3"])), st.booleans())
def test_a_selector_in_cel_selects_as_kubernetes_selects(selector, labels, on_the_pod):
    parsed = parse_selector(selector, "selector")
    pod = {"metadata": {"labels": labels} if labels else {}, "spec": {}}
    where = "object.metadata" if on_the_pod else "namespaceObject.metadata"
    namespace_labels = {**labels, "kubernetes.io/metadata.name": "ml"}
    condition = compile_expression(selector_condition(parsed, where))
    expected = parsed.matches(labels if on_the_pod else namespace_labels)
    assert condition.evaluate_bool(cel_input(pod, "ml", namespace_labels)) is expected


def test_no_gate_after_a_policy_owning_every_pod():
    everything = policy("everything", "priority: 20\nmig: {allowedProfiles: [1g.10gb]}")
    assert {o["metadata"]["name"] for o in generate(everything, FIRST, SECOND)} == {"gpu-admission.everything.mig"}
