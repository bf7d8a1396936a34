"""The cluster as the engine sees it in the server: namespace labels, free GPU capacity and
ResourceQuotas on whole GPUs, kept current by watches (webhook.cluster_watches)."""

from __future__ import annotations

from collections.abc import Mapping

from policies.capacity import Capacity
from webhook.namespaces import GpuQuotaCache, NamespaceCache


class LiveCluster:
    def __init__(self, namespaces: NamespaceCache, capacity: Capacity, quotas: GpuQuotaCache) -> None:
        self.namespaces = namespaces
        self.quotas = quotas
        self._capacity = capacity

    @property
    def capacity(self) -> Capacity:
        return self._capacity

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.labels(namespace)

    def gpu_quotas(self, namespace: str) -> tuple[str, ...]:
        return self.quotas.names(namespace)
