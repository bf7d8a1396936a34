"""What the engine may know of the cluster beyond the object under review: namespace labels (for
namespaceSelector), free GPU capacity (to prefer models and profiles that can run now), the
ResourceQuotas on whole GPUs that a MIG rewrite would sidestep (to warn), the DRA
ResourceClaims and ResourceClaimTemplates a pod names (what they can allocate is its charge), and
the DeviceClasses and the devices of ResourceSlices that say what a claim's requests can select.

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

    def claim_demand(self, namespace: str, template: bool, name: str) -> ClaimDemand | None:
        return self.claims.get((namespace, template, name))

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.get(namespace)

    def gpu_quotas(self, namespace: str) -> tuple[str, ...]:
        return self.quotas.get(namespace, ())


WHOLE_GPU_QUOTA = "requests.nvidia.com/gpu"


def limits_whole_gpus(resource_quota: Mapping[str, object]) -> bool:
    """Whether a ResourceQuota's hard limits count `requests.nvidia.com/gpu` (the only form the API
    server takes for an extended resource)."""
    spec = resource_quota.get("spec")
    hard = spec.get("hard") if isinstance(spec, Mapping) else None
    return isinstance(hard, Mapping) and WHOLE_GPU_QUOTA in hard


NO_CLUSTER = KnownCluster()
