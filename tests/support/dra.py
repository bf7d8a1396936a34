"""DRA objects as the tests write them (resource.k8s.io/v1): DeviceClasses, ResourceClaims and
templates, their requests and selectors; shaped after NVIDIA's DRA driver (its chart's classes,
its extended-resources demo), written here, not copied."""

from __future__ import annotations

from typing import Any

from policies.gpu.capacity import NoCapacity
from policies.gpu.catalog import CATALOG
from policies.gpu.claims import claim_demand, with_allocation
from policies.gpu.device_classes import DeviceClasses, read_device_class
from policies.gpu.device_reach import NO_DEVICES
from policies.gpu.dra_inventory import DraInventory, WithDra, allocated_devices, read_slice
from policies.review.cluster import KnownCluster, pod_group_claims
from tests.support.builders import pod

API_VERSION = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"


def cel(expression: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expression}}]


def nvidia(attribute: str, value: str) -> str:
    return f"device.attributes['{DRIVER}'].{attribute} == '{value}'"


def mig_profile(profile: str) -> str:
    return f"device.driver == '{DRIVER}' && {nvidia('type', 'mig')} && {nvidia('profile', profile)}"


def device_class(name: str, expression: str = "", extended: str = "", created: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if expression:
        spec["selectors"] = cel(expression)
    if extended:
        spec["extendedResourceName"] = extended
    metadata: dict[str, Any] = {"name": name}
    if created:
        metadata["creationTimestamp"] = created
    return {"apiVersion": API_VERSION, "kind": "DeviceClass", "metadata": metadata, "spec": spec}


# NVIDIA's classes as its driver's chart publishes them, and a per-profile class of its demo.
GPU_CLASS = device_class("gpu.nvidia.com", f"device.driver == '{DRIVER}' && {nvidia('type', 'gpu')}", "nvidia.com/gpu")
MIG_CLASS = device_class("mig.nvidia.com", f"device.driver == '{DRIVER}' && {nvidia('type', 'mig')}")
NIC_CLASS = device_class("nic.example.com", "device.driver == 'nic.example.com'")


def profile_class(profile: str) -> dict[str, Any]:
    """NVIDIA's extended-resources demo: one class a profile, serving the device plugin's name."""
    return device_class(
        f"mig-{profile.replace('.', '-')}.gpu.nvidia.com", mig_profile(profile), f"nvidia.com/mig-{profile}"
    )


def exactly(device_class: str, count: int | None = None, expression: str = "", **more: Any) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": device_class, **more}
    if count is not None:
        request["count"] = count
    if expression:
        request["selectors"] = cel(expression)
    return request


def claim_spec(*requests: dict[str, Any], config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A claim's spec of requests (`exactly` ones, or whole request bodies with firstAvailable)."""
    listed = [r if "firstAvailable" in r else {"exactly": r} for r in requests]
    devices: dict[str, Any] = {"requests": [{"name": f"r{i}", **r} for i, r in enumerate(listed)]}
    if config:
        devices["config"] = config
    return {"devices": devices}


def claim(name: str, namespace: str, spec: dict[str, Any], template: bool = False) -> dict[str, Any]:
    kind = "ResourceClaimTemplate" if template else "ResourceClaim"
    body = {"spec": spec} if template else spec
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": body}


def slice_device(
    name: str, product: str, profile: str = "", memory: str = "", kind: str = "", **consumes: str
) -> dict[str, Any]:
    """A device as NVIDIA's driver publishes it: a whole GPU, or a MIG device of `profile` (or
    of the `kind` given: vfio); `consumes`: counters of the GPU's counter set it takes (a
    partitionable pool)."""
    attributes = {"type": {"string": kind or ("mig" if profile else "gpu")}, "productName": {"string": product}}
    if profile:
        attributes["profile"] = {"string": profile}
    device: dict[str, Any] = {"name": name, "attributes": attributes}
    if memory:
        device["capacity"] = {"memory": {"value": memory}}
    if consumes:
        counters = {counter: {"value": amount} for counter, amount in consumes.items()}
        device["consumesCounters"] = [{"counterSet": "gpu-0", "counters": counters}]
    return device


def shareable(device: dict[str, Any], policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """`device` allowing multiple allocations (consumable capacity), its memory under `policy`
    (a requestPolicy: default, validValues or validRange) where given."""
    made = {**device, "allowMultipleAllocations": True}
    if policy is not None:
        made["capacity"] = {"memory": {**device["capacity"]["memory"], "requestPolicy": policy}}
    return made


def resource_slice(
    node: str,
    *devices: dict[str, Any],
    counters: dict[str, str] | None = None,
    driver: str = DRIVER,
    generation: int = 1,
    name: str = "",
) -> dict[str, Any]:
    """A node's ResourceSlice; `counters`: the shared counter set `gpu-0` of a partitionable pool."""
    spec: dict[str, Any] = {
        "driver": driver,
        "nodeName": node,
        "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
        "devices": list(devices),
    }
    if counters:
        spec["sharedCounters"] = [{"name": "gpu-0", "counters": {k: {"value": v} for k, v in counters.items()}}]
    metadata = {"name": name or f"{node}-{driver}-{generation}"}
    return {"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": metadata, "spec": spec}


def allocated(name: str, namespace: str, *devices: tuple[str, str]) -> dict[str, Any]:
    """A ResourceClaim whose status says the scheduler allocated (pool, device) of NVIDIA's driver."""
    results = [{"request": "r0", "driver": DRIVER, "pool": pool, "device": device} for pool, device in devices]
    made = claim(name, namespace, claim_spec(exactly("gpu.nvidia.com")))
    made["status"] = {"allocation": {"devices": {"results": results}}}
    return made


H100_CLASS = device_class("h100.example.com", f"device.driver == 'gpu.nvidia.com' && {nvidia('productName', 'H100')}")
SERVED = device_class("served.example.com", "device.driver == 'gpu.nvidia.com'", "example.com/h100")
CLASSES = [GPU_CLASS, MIG_CLASS, NIC_CLASS, H100_CLASS, SERVED, profile_class("1g.12gb"), profile_class("7g.80gb")]


def cluster(
    *claims: dict[str, Any],
    classes: list[dict[str, Any]] = CLASSES,
    slices: tuple[dict[str, Any], ...] = (),
    groups: tuple[dict[str, Any], ...] = (),
) -> KnownCluster:
    """A cluster with these claims and templates (as their status says, allocated or not), every
    class above, the devices of `slices` shown (none: no device is known) and PodGroups `groups`."""
    demands = {}
    for c in claims:
        template = c["kind"] == "ResourceClaimTemplate"
        spec = c["spec"]["spec"] if template else c["spec"]
        demand = claim_demand(spec)
        demands[(c["metadata"]["namespace"], template, c["metadata"]["name"])] = (
            demand if template else with_allocation(demand, c.get("status"))
        )
    known = DeviceClasses.of(read_device_class(c) for c in classes)
    devices = inventory(*slices) if slices else NO_DEVICES
    known_groups = {(g["metadata"]["namespace"], g["metadata"]["name"]): pod_group_claims(g) for g in groups}
    return KnownCluster(claims=demands, knows_claims=True, device_classes=known, devices=devices, groups=known_groups)


def pod_group(
    name: str, templates: dict[str, str], namespace: str = "ml", made: dict[str, str] | None = None
) -> dict[str, Any]:
    """A PodGroup (scheduling.k8s.io/v1beta1, Kubernetes 1.37) making the claims `templates`
    (claim name: template) for all its pods; `made`: the claims its status says were made."""
    group: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "resourceClaims": [{"name": n, "resourceClaimTemplateName": t} for n, t in templates.items()],
        },
    }
    if made:
        group["status"] = {"resourceClaimStatuses": [{"name": n, "resourceClaimName": c} for n, c in made.items()]}
    return group


def group_pod(
    name: str,
    group: str | None,
    claims: dict[str, str],
    namespace: str = "ml",
    made: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod of PodGroup `group` (None: of none) whose claims are made from templates (claim name:
    template), its one container using them all; `made`: the claims its status says it holds;
    `spec`: more of its spec (tolerations)."""
    container = {"name": "main", "image": "cuda", "resources": {"claims": [{"name": n} for n in claims]}}
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    made_pod = pod(
        container,
        namespace=namespace,
        resourceClaims=[{"name": n, "resourceClaimTemplateName": t} for n, t in claims.items()],
        **spec,
    )
    made_pod["metadata"]["name"] = name
    if made:
        made_pod["status"] = {"resourceClaimStatuses": [{"name": n, "resourceClaimName": c} for n, c in made.items()]}
    return made_pod


def inventory(*slices: dict[str, Any], claims: tuple[dict[str, Any], ...] = ()) -> DraInventory:
    """What a replica's ResourceSlice and claim watches show."""
    found = DraInventory()
    contents = {s["metadata"]["name"]: read_slice(s, CATALOG) for s in slices}
    found.replace_slices({k: v for k, v in contents.items() if v is not None})
    found.held.replace_allocations((c["metadata"]["name"], allocated_devices(c)) for c in claims)
    return found


def claim_pod(*names: str, namespace: str = "ml") -> dict[str, Any]:
    """A pod naming the ResourceClaims `names`, its one container using the first."""
    container = {"name": "main", "image": "cuda", "resources": {"claims": [{"name": "c0"}]}}
    return pod(
        container,
        namespace=namespace,
        resourceClaims=[{"name": f"c{i}", "resourceClaimName": n} for i, n in enumerate(names)],
    )


def dra_capacity(
    *slices: dict[str, Any],
    classes: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    claims: tuple[dict[str, Any], ...] = (),
    labels: Any = None,
) -> tuple[WithDra, DeviceClasses]:
    """What a replica sees: node labels (`labels`, a CapacityLedger; none by default) with the
    devices of `slices` less what `claims` hold, offered to the names `classes` serve."""
    found = inventory(*slices, claims=claims)
    known = DeviceClasses.of(read_device_class(c) for c in classes)
    return WithDra(labels if labels is not None else NoCapacity(), found, lambda: known), known


def labels_alone(ledger: Any) -> WithDra:
    """What a replica sees of a cluster whose GPUs only node labels and the device plugin show
    (a CapacityLedger, `ledger`): no ResourceSlice, so DRA says nothing."""
    return WithDra(ledger, DraInventory(), lambda: DeviceClasses.of(()))
