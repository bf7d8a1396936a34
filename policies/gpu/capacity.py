"""Free GPU capacity in the cluster, as the engine sees it: slices of a profile, or whole GPUs,
free on the nodes of one GPU model. The edge fills it from a node and pod watch; without one,
nothing is known and the policy's own order decides."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from policies.gpu.catalog import Catalog
from policies.gpu.models import MIG_RESOURCE_PREFIX, PRODUCT_LABEL, WHOLE_GPU_RESOURCE
from policies.quantity import QuantityParser


class Capacity(Protocol):
    @property
    def known(self) -> bool:
        """Whether the figures come from the cluster at all."""
        ...

    def free(self, model: str, profile: str | None, resource: str) -> int:
        """Free units of `resource` that are slices of `profile` (whole GPUs for None) on nodes of
        the GPU model `model`: `nvidia.com/mig-<profile>` on mixed-strategy nodes, `nvidia.com/gpu`
        on single-strategy ones (and on nodes without MIG, for whole GPUs)."""
        ...


class NoCapacity:
    known = False

    def free(self, model: str, profile: str | None, resource: str) -> int:
        return 0


Slot = tuple[str, str | None, str]  # (GPU model key, profile name or None for whole GPUs, resource)


class CapacityLedger:
    """Free GPU capacity per (model, profile), kept as running sums from node and pod events.

    A node's `nvidia.com/gpu.product` label names its model (and, under the single strategy,
    its profile); its allocatable `nvidia.com/gpu` and `nvidia.com/mig-*` are the capacity.
    Pods bound to a node (spec.nodeName) use it. Pending pods use nothing yet: capacity is what
    the scheduler could place now. Only sums are kept, never nodes' or pods' objects.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._synced = False
        self._slots: dict[str, dict[str, Slot]] = {}  # node -> resource -> slot
        self._allocatable: dict[str, Mapping[str, int]] = {}
        self._used_on: dict[str, dict[str, int]] = {}  # node -> resource -> in use
        self._capacity: dict[Slot, int] = {}
        self._used: dict[Slot, int] = {}

    def free(self, model: str, profile: str | None, resource: str) -> int:
        slot = (model, profile, resource)
        return max(0, self._capacity.get(slot, 0) - self._used.get(slot, 0))

    def nodes(self) -> list[str]:
        return list(self._slots)

    @property
    def known(self) -> bool:
        """Nodes were listed and some carry GPUs this catalog knows (no GPU Feature Discovery
        labels anywhere: nothing is known, rather than everything taken)."""
        return self._synced and bool(self._slots)

    def mark_synced(self) -> None:
        self._synced = True

    def set_node(self, name: str, product: str | None, allocatable: Mapping[str, int]) -> None:
        self.remove_node(name)
        found = self.catalog.from_product_label(product) if product else None
        if found is None:
            return
        model, single_profile = found
        slots: dict[str, Slot] = {}
        for resource, amount in allocatable.items():
            if resource == WHOLE_GPU_RESOURCE:
                slots[resource] = (model.key, single_profile.name if single_profile else None, resource)
            else:
                profile = self.catalog.profile_for_resource(resource)
                if profile is None:
                    continue
                slots[resource] = (model.key, profile, resource)
            _add(self._capacity, slots[resource], amount)
        self._slots[name] = slots
        self._allocatable[name] = dict(allocatable)
        for resource, amount in self._used_on.get(name, {}).items():
            if resource in slots:
                _add(self._used, slots[resource], amount)

    def remove_node(self, name: str) -> None:
        slots = self._slots.pop(name, None)
        if slots is None:
            return
        for resource, amount in self._allocatable.pop(name).items():
            if resource in slots:
                _add(self._capacity, slots[resource], -amount)
        for resource, amount in self._used_on.get(name, {}).items():
            if resource in slots:
                _add(self._used, slots[resource], -amount)

    def use(self, node: str, amounts: Sequence[tuple[str, int]], sign: int = 1) -> None:
        """A pod bound to `node` starts (sign 1) or stops (sign -1) using `amounts`."""
        tally(self._used_on, node, amounts, sign)
        slots = self._slots.get(node, {})
        for resource, amount in amounts:
            if resource in slots:
                _add(self._used, slots[resource], sign * amount)

    def replace_uses(self, uses: Mapping[str, Mapping[str, int]]) -> None:
        """After a relist of pods: what every node has in use, as counted afresh (`node_uses`)."""
        self._used_on = {node: dict(amounts) for node, amounts in uses.items()}
        self._used = {}
        for node, amounts in self._used_on.items():
            slots = self._slots.get(node, {})
            for resource, amount in amounts.items():
                if resource in slots:
                    _add(self._used, slots[resource], amount)


def tally(uses: dict[str, dict[str, int]], node: str, amounts: Iterable[tuple[str, int]], sign: int = 1) -> None:
    """Add (or take away) a pod's GPU amounts to what `node` has in use; an idle node leaves."""
    used = uses.setdefault(node, {})
    for resource, amount in amounts:
        used[resource] = used.get(resource, 0) + sign * amount
    if not any(used.values()):
        del uses[node]


def node_uses(pods: Iterable[tuple[str | None, tuple[tuple[str, int], ...]]]) -> dict[str, dict[str, int]]:
    """What every node has in use, from (node, GPU amounts) of the pods; unbound pods use nothing."""
    uses: dict[str, dict[str, int]] = {}
    for node, amounts in pods:
        if node is not None:
            tally(uses, node, amounts)
    return uses


def node_gpus(raw: Mapping[str, Any], parse_quantity: QuantityParser) -> tuple[str, str | None, dict[str, int]]:
    """A Node's name, GPU product label and allocatable GPU resources in whole units (the boundary
    for Nodes: anything unreadable counts as no GPU)."""
    metadata = raw.get("metadata") or {}
    allocatable = (raw.get("status") or {}).get("allocatable") or {}
    gpus: dict[str, int] = {}
    for resource, amount in allocatable.items():
        if resource == WHOLE_GPU_RESOURCE or str(resource).startswith(MIG_RESOURCE_PREFIX):
            try:
                gpus[str(resource)] = int(parse_quantity(amount))
            except (ValueError, TypeError, ArithmeticError):
                continue
    product = (metadata.get("labels") or {}).get(PRODUCT_LABEL)
    return str(metadata.get("name", "")), product if isinstance(product, str) else None, gpus


def _add(sums: dict[Slot, int], slot: Slot, amount: int) -> None:
    total = sums.get(slot, 0) + amount
    if total:
        sums[slot] = total
    else:
        sums.pop(slot, None)
