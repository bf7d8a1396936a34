"""What the engine may know of the cluster beyond the object under review: namespace labels (for
namespaceSelector), free GPU capacity (to prefer models and profiles that can run now), the
ResourceQuotas on whole GPUs that a MIG rewrite would sidestep (to warn), the DRA
ResourceClaims and ResourceClaimTemplates a pod names (what they can allocate is its charge), the
claims PodGroups make once for all their pods, and the DeviceClasses and the devices of
ResourceSlices that say what a claim's requests can select.

The edge fills it from its watches; offline, from `--cluster-state`; with nothing, it knows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from policies.gpu.capacity import Capacity, NoCapacity
from policies.gpu.claims import ClaimDemand
from policies.gpu.device_classes import DEFAULT_CLASSES, DeviceClasses
from policies.gpu.device_reach import NO_DEVICES, DeviceReach
from policies.review.pod import claims_made

# A PodGroup's claims made from templates (scheduling.k8s.io spec.resourceClaims, immutable):
# (name, template) -> the claim made for the group (its status.resourceClaimStatuses; "" until made).
GroupClaims = Mapping[tuple[str, str], str]


class ClusterState(Protocol):
    @property
    def capacity(self) -> Capacity: ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels, or None where it is not known."""
        ...

    def gpu_quotas(self, namespace: str) -> tuple[str, ...]:
        """Names of the namespace's ResourceQuotas on `requests.nvidia.com/gpu`."""
        ...

    @property
    def knows_claims(self) -> bool:
        """Whether every ResourceClaim and template of the cluster is known (a live replica's
        watch): a claim not found then does not exist (yet)."""
        ...

    def claim_demand(self, namespace: str, template: bool, name: str) -> ClaimDemand | None:
        """What a ResourceClaim (or, `template`, a ResourceClaimTemplate) can allocate of
        NVIDIA's GPUs; None where it is not known."""
        ...

    def group_claims(self, namespace: str, group: str) -> GroupClaims | None:
        """The claims a PodGroup makes from templates for all its pods; None where the group is
        not known."""
        ...

    @property
    def device_classes(self) -> DeviceClasses:
        """The DRA DeviceClasses: what each selects, which extended resources each serves."""
        ...

    @property
    def devices(self) -> DeviceReach:
        """NVIDIA's devices the cluster's ResourceSlices show: what a request's selectors reach,
        and a device an allocation names."""
        ...


@dataclass(frozen=True, slots=True)
class KnownCluster:
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    capacity: Capacity = field(default_factory=NoCapacity)
    quotas: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    claims: Mapping[tuple[str, bool, str], ClaimDemand] = field(default_factory=dict)
    knows_claims: bool = False
    device_classes: DeviceClasses = DEFAULT_CLASSES
    devices: DeviceReach = NO_DEVICES  # the devices ResourceSlices show (a DraInventory)
    groups: Mapping[tuple[str, str], GroupClaims] = field(default_factory=dict)  # (namespace, PodGroup)

    def claim_demand(self, namespace: str, template: bool, name: str) -> ClaimDemand | None:
        return self.claims.get((namespace, template, name))

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.get(namespace)

    def group_claims(self, namespace: str, group: str) -> GroupClaims | None:
        return self.groups.get((namespace, group))

    def gpu_quotas(self, namespace: str) -> tuple[str, ...]:
        return self.quotas.get(namespace, ())


WHOLE_GPU_QUOTA = "requests.nvidia.com/gpu"
POD_GROUP_API = "scheduling.k8s.io/"  # PodGroup: v1alpha2 in Kubernetes 1.36, v1beta1 in 1.37


def is_pod_group(api_version: object, kind: object) -> bool:
    return kind == "PodGroup" and isinstance(api_version, str) and api_version.startswith(POD_GROUP_API)


def pod_group_claims(pod_group: Mapping[str, object]) -> GroupClaims:
    """A PodGroup's claims made from templates: a pod of the group whose own claim has the same
    name and template shares the one claim made for the group (KEP-5729; the resourceclaim
    controller's BindTo). A claim by name is one claim however many pods name it, in a group or
    not; entries the API server would refuse are left out (a pod's template claim then counts
    for it alone)."""
    spec, status = pod_group.get("spec"), pod_group.get("status")
    made = claims_made(_list(status.get("resourceClaimStatuses") if isinstance(status, Mapping) else None))
    found = {}
    for entry in _list(spec.get("resourceClaims") if isinstance(spec, Mapping) else None):
        if isinstance(entry, Mapping) and "resourceClaimName" not in entry:
            name, template = entry.get("name"), entry.get("resourceClaimTemplateName")
            if isinstance(name, str) and name and isinstance(template, str) and template:
                found[(name, template)] = made.get(name, "")
    return found


def _list(value: object) -> list[object]:
    # A PodGroup is read as the cluster holds it (from a watch): what is not a list holds nothing.
    return value if isinstance(value, list) else []


def limits_whole_gpus(resource_quota: Mapping[str, object]) -> bool:
    """Whether a ResourceQuota's hard limits count `requests.nvidia.com/gpu` (the only form the API
    server takes for an extended resource)."""
    spec = resource_quota.get("spec")
    hard = spec.get("hard") if isinstance(spec, Mapping) else None
    return isinstance(hard, Mapping) and WHOLE_GPU_QUOTA in hard


NO_CLUSTER = KnownCluster()
