"""What the engine may know of the cluster beyond the object under review: namespace labels (for
namespaceSelector) and free GPU capacity (to prefer models and profiles that can run now).

The edge fills it from its watches; offline, from `--cluster-state`; with nothing, it knows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from policies.capacity import Capacity, NoCapacity


class ClusterState(Protocol):
    @property
    def capacity(self) -> Capacity: ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's labels, or None where it is not known."""
        ...


@dataclass(frozen=True)
class KnownCluster:
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    capacity: Capacity = field(default_factory=NoCapacity)

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.get(namespace)


NO_CLUSTER = KnownCluster()
