"""One replica's view of its cluster: namespace labels, ResourceQuotas on whole GPUs, DRA claims,
quota usage and free GPU capacity, kept current by the watches (webhook.cluster.wiring). It is also the
cluster as the engine sees it (policies.review.cluster.ClusterState)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from policies import (
    Capacity,
    ClaimDemand,
    DeviceClasses,
    GPUPolicy,
    GroupClaims,
    PolicySet,
    QuotaLine,
    Usage,
    WithDra,
    quota_lines,
    scopes,
)
from webhook.cluster.quota.counting.pod_counting import PodCounting
from webhook.cluster.quota.tracking import QuotaTracking, TrackingFactory, build_tracking
from webhook.cluster.watches.claims import ClaimCache
from webhook.cluster.watches.device_classes import DeviceClassCache
from webhook.cluster.watches.namespaces import GpuQuotaCache, NamespaceCache
from webhook.cluster.watches.nodes import NodeCapacity
from webhook.cluster.watches.pod_groups import PodGroupCache
from webhook.cluster.watches.slices import DraCapacity
from webhook.events import Events, NamespaceLabelsChanged, PolicySetInForce
from webhook.metrics import DUAL_ADVERTISED_NODES

# (group, version, plural, namespace, name) -> the object, or None where there is none
ReadWorkload = Callable[[str, str, str, str, str], "dict[str, Any] | None"]


def _no_workload(group: str, version: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    return None


@dataclass(frozen=True)
class ClusterLink:
    """What a replica reaches its cluster by, beyond what its watches show: a namespace the watch
    has not shown yet (`read_namespace`: the pod may come right behind its namespace), a workload
    whose Scale subresource is reviewed (`read_workload`: a Scale carries a count, no template),
    and its quota tracking built over its counters (`tracking`: strict budgets through their
    Leases, webhook.cluster.wiring.cluster_link). LOCAL: no cluster (bundled policies or
    directories, offline): nothing is read, and budgets are this replica's alone."""

    read_namespace: Callable[[str], dict[str, Any] | None] | None = None
    read_workload: ReadWorkload = _no_workload
    tracking: TrackingFactory = build_tracking


LOCAL = ClusterLink()


class LiveCluster:
    """The caches the watches feed, the pod counters and the quota tracking over them, built
    complete from `link`; and `events`: what the caches publish, and the new policy sets
    announced through `policy_set_changed` (webhook.events)."""

    def __init__(
        self,
        policy_set: Callable[[], PolicySet | None],
        events: Events,
        clock: Callable[[], float] = time.monotonic,
        link: ClusterLink = LOCAL,
    ) -> None:
        self.policy_set = policy_set  # the policies in force, if loaded
        self.events = events
        self.namespaces = NamespaceCache(self.events, link.read_namespace)
        self.quotas = GpuQuotaCache()
        self.claims = ClaimCache(self.events)
        self.pod_groups = PodGroupCache(self.events)
        self.device_class_cache = DeviceClassCache(self.events)
        self.nodes = NodeCapacity()
        self.slices = DraCapacity()
        # What node labels say, with what DRA devices offer to names a DeviceClass serves.
        self._capacity = WithDra(self.nodes.capacity, self.slices, lambda: self.device_class_cache.classes)
        # The pods counted, by quota budget: one set of counters for the replica's life.
        self.counting = PodCounting(
            policy_set, clock, namespace_labels=self.namespaces.known, nodes=self.nodes, cluster=self
        )
        # Pods of namespaces whose labels changed may match other namespaceSelectors now.
        counting = self.counting
        events.subscribe(NamespaceLabelsChanged, lambda changed: counting.recharge_namespaces(changed.namespaces))
        # Admission against them: the reservations it makes live in these counters.
        self.tracking: QuotaTracking = link.tracking(self.counting, events)
        if self.tracking.counting is not self.counting:
            raise ValueError("quota tracking must be built over this view's counting")
        # A workload as the API server holds it, for a review of its Scale subresource.
        self.read_workload: ReadWorkload = link.read_workload
        self._dual_count = -1  # what the dual-advertised gauge was last set to

    # -- policies.review.cluster.ClusterState ------------------------------------------------------------
    @property
    def capacity(self) -> Capacity:
        return self._capacity

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.labels(namespace)

    def gpu_quotas(self, namespace: str) -> tuple[str, ...]:
        return self.quotas.names(namespace)

    @property
    def knows_claims(self) -> bool:
        return self.claims.complete

    def claim_demand(self, namespace: str, template: bool, name: str) -> ClaimDemand | None:
        return self.claims.demand(namespace, template, name)

    def group_claims(self, namespace: str, group: str) -> GroupClaims | None:
        return self.pod_groups.claims(namespace, group)

    @property
    def device_classes(self) -> DeviceClasses:
        return self.device_class_cache.classes

    @property
    def devices(self) -> DraCapacity:
        return self.slices

    def dual_advertised(self) -> frozenset[str]:
        """Nodes whose GPUs both the device plugin and NVIDIA's DRA driver advertise."""
        return self._capacity.dual_advertised()

    def nodes_or_slices_changed(self, *_: Any) -> None:
        """After a node or ResourceSlice event (or list): the dual-advertised gauge, written only
        when its count changes (a write under several workers is a metrics file's)."""
        count = len(self.dual_advertised())
        if count != self._dual_count:
            self._dual_count = count
            DUAL_ADVERTISED_NODES.set(count)

    # -- wiring ------------------------------------------------------------------------------------
    def policy_set_changed(self) -> None:
        """A new policy set is in force: PolicySetInForce published (the pod counters follow it)."""
        self.events.publish(PolicySetInForce())

    # -- the quota view ------------------------------------------------------------------------
    def quota_lines(self, policy_set: PolicySet | None) -> list[QuotaLine]:
        """What this replica's counters hold per policy, scope and dimension (the quota metrics)."""
        if policy_set is None:
            return []
        budgets = self.tracking.budgets
        counted = self.counting.counted()
        held = counted.held()
        namespaces = {scope: self.namespaces.known(scope) for _, scope in held if scope}

        class Reserved:
            def usage(self, policy: GPUPolicy, scope: str) -> Usage:
                return budgets.reserved(policy, scope)

            def shared_claims(self, policy: GPUPolicy, scope: str) -> Collection[str]:
                return ()  # reservations charge what each pod can get, its named claims whole

        return quota_lines(scopes(policy_set, namespaces, held), counted, Reserved())
