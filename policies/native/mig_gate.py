"""The MIG resources a container may name, as ValidatingAdmissionPolicies: `allowedProfiles` and
`gpuModels` held for the slices a pod names itself, as the webhook holds them
(policies.planning.gate), with no call out.

What a container may name depends on no cluster state: the resource name says the profile, the
catalog says which models offer it, the policy says which profiles and models it allows. Which
policy says so does depend on the other policies: the first matching policy with a `mig` section
owns the pod's MIG settings (policies.planning.applicable.plan_mig). So a policy's gate,
`gpu-admission.<policy>.mig`, holds where the policy matches and no cluster policy before it with
a `mig` section does (their matches in CEL, policies.native.matching); the gates are made from
the whole set at once, as the webhook runs it.

Each names the resources it refuses in a variable, each with the engine's reason
(`policies.planning.gate.refusal`, the one place those words are written), `.shared` replicas
with their profile's; a container refused is named with its field path as the engine names it.
Every gate also holds each container to one MIG device (CUDA uses one), so every cluster policy
with a `mig` section has one. A name the catalog does not know is left to the webhook (it says
which names are close), and so are DRA claims' profiles and the rewrite itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from policies.gpu.catalog import Catalog
from policies.gpu.models import MIG_RESOURCE_PREFIX, SHARED_RESOURCE_SUFFIX
from policies.model.policy import Action, GPUPolicy, MigSpec
from policies.native.matching import cel_string, matches
from policies.native.objects import (
    MIG,
    TOO_LONG,
    Uncovered,
    admission_policy,
    binding,
    held,
    nonzero,
    object_name,
    one_line,
    too_long,
)
from policies.planning.gate import ONE_DEVICE, refusal

CONTAINERS = ("containers", "initContainers")
_REFUSED = "refused"  # the variable: resource name -> why it is refused


def refused_resources(spec: MigSpec, catalog: Catalog) -> dict[str, str]:
    """The MIG resources (and `.shared` replicas) a container may not name under `spec`, and why,
    in the engine's words; none when the policy allows every profile on every model."""
    refused: dict[str, str] = {}
    for resource, profile in sorted(catalog.mig_resources.items()):
        why = refusal(profile, spec, catalog)
        if why is not None:
            refused[resource] = why
            refused[resource + SHARED_RESOURCE_SUFFIX] = why
    return refused


def mig_gates(
    ordered: Sequence[GPUPolicy], catalog: Catalog, left_alone: Sequence[str]
) -> tuple[list[dict[str, object]], list[str], list[Uncovered]]:
    """The gates of `ordered` (policies in precedence order), the policies they come from, and
    the gates left to the webhook (their conditions past what the API server takes)."""
    objects: list[dict[str, object]] = []
    names: list[str] = []
    left: list[Uncovered] = []
    owners_before: list[str] = []
    for policy in ordered:
        if policy.namespace is not None or policy.mig is None:
            continue  # a namespaced policy never decides MIG where a cluster policy matches
        refused = refused_resources(policy.mig, catalog)
        variables = [_devices_in(field) for field in CONTAINERS]
        validations = [_one_device(policy, field) for field in CONTAINERS]
        if refused:  # the profiles and models it refuses, where it refuses any
            table = "{\n" + ",\n".join(f"  {cel_string(r)}: {cel_string(why)}" for r, why in refused.items()) + "\n}"
            variables += [(_REFUSED, table), *(_refused_in(field) for field in CONTAINERS)]
            validations = [_validation(policy, field) for field in CONTAINERS] + validations
        name = object_name(policy.name, MIG)
        gate = admission_policy(policy, name, validations, left_alone, variables, owners_before)
        if too_long(gate):
            left.append(Uncovered(policy.name, "mig gate", f"{len(owners_before)} policies before it: {TOO_LONG}"))
        else:
            objects += [gate, binding(policy, name, Action.DENY)]
            names.append(policy.name)
        owners_before.append(matches(policy))
        if owners_before[-1] == "true":
            break  # it matches every pod: no policy after it ever owns one
    return objects, names, left


def _refused_in(field: str) -> tuple[str, str]:
    """The variable: for each container of `field`, in order, the names it holds that are refused."""
    items = f"object.spec.{field}"
    names = held("c", f"r in variables.{_REFUSED}", nonzero("{}"))
    return f"{field}Refused", f"!has({items}) ? [] : {items}.map(c, {names})"


def _validation(policy: GPUPolicy, field: str) -> dict[str, object]:
    found = f"variables.{_refused_in(field)[0]}"
    # The first container refused, and its first name refused: the engine names each, the API
    # server one message a validation. `indexOf` is the lists library's (Kubernetes 1.26+).
    resource = f"{found}.filter(l, size(l) > 0)[0][0]"
    position = f"string({found}.map(l, size(l) > 0).indexOf(true))"
    where = f" {one_line(f'(policy {policy.name})')} [rule mig, spec.{field}["
    return {
        "expression": f"{found}.all(l, size(l) == 0)",
        "messageExpression": (
            f"{resource} + ': ' + variables.{_REFUSED}[{resource}] + {cel_string(where)} + {position} + '].resources]'"
        ),
        "message": f"a container names a MIG profile this policy refuses{where[:-1]}]",
    }


def _devices_in(field: str) -> tuple[str, str]:
    """The variable: for each container of `field`, in order, how many MIG devices it asks for
    (every `nvidia.com/mig-` name, known or not, limits winning over requests)."""
    items = f"object.spec.{field}"
    amounts = held("c", f"r.startsWith({cel_string(MIG_RESOURCE_PREFIX)})", value="quantity({}).asInteger()")
    return f"{field}Devices", f"!has({items}) ? [] : {items}.map(c, {amounts}).map(l, size(l) == 0 ? 0 : l.sum())"


def _one_device(policy: GPUPolicy, field: str) -> dict[str, object]:
    """One MIG device a container: CUDA uses only one (k8s-device-plugin issue 728)."""
    counts = f"variables.{_devices_in(field)[0]}"
    position = f"{counts}.map(n, n > 1).indexOf(true)"
    where = f" {one_line(f'(policy {policy.name})')} [rule mig, spec.{field}["
    told = f"'asks for ' + string({counts}[{position}]) + ' MIG devices' + {cel_string(ONE_DEVICE)}"
    return {
        "expression": f"{counts}.all(n, n <= 1)",
        "messageExpression": f"{told} + {cel_string(where)} + string({position}) + '].resources]'",
        "message": f"a container asks for more than one MIG device{where[:-1]}]",
    }
