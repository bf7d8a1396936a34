"""Free GPU capacity in the cluster, as the engine sees it: slices of a profile, or whole GPUs,
free on the nodes of one GPU model, and the real memory GPU Feature Discovery reports for each
profile. The edge fills it from a node and pod watch; without one, nothing is known and the
policy's own order (and NVIDIA's published memory figures) decide.

A node counts as GFD and mig-manager label it: its product label names the model (and, under
the single strategy, the profile every GPU is split into; `-MIG-INVALID`, split unevenly, is
never counted), `nvidia.com/mig.strategy` says which resources mean what (under `single` only
`nvidia.com/gpu`, as slices; under `mixed` the `nvidia.com/mig-*` slices and whole GPUs), and a
node whose `nvidia.com/mig.config.state` is not `success` is being split anew: its allocatable
is about to change, so it offers nothing until it is done."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from policies.gpu.catalog import Catalog
from policies.gpu.cloud import GKE_ACCELERATOR, GKE_PARTITION, named_by
from policies.gpu.models import (
    CONFIG_STATE_LABEL,
    GPU_MEMORY_LABEL,
    MIG_RESOURCE_PREFIX,
    PRODUCT_LABEL,
    STRATEGY_LABEL,
    WHOLE_GPU_RESOURCE,
    GpuModel,
    Profile,
    label_name,
    memory_label,
)
from policies.quantity import parse_quantity

SETTLED = "success"  # mig.config.state of a node split as asked


class LabelCapacity(Protocol):
    """What node labels and the device plugin say of GPUs (CapacityLedger); WithDra adds DRA."""

    @property
    def known(self) -> bool:
        """Whether the figures come from the cluster at all."""
        ...

    def free(self, model: str, profile: str | None, resource: str) -> int:
        """Free units of `resource` that are slices of `profile` (whole GPUs for None) on nodes of
        the GPU model `model`: `nvidia.com/mig-<profile>` on mixed-strategy nodes, `nvidia.com/gpu`
        on single-strategy ones (and on nodes without MIG, for whole GPUs)."""
        ...

    def memory_mib(self, model: str, profile: str) -> int | None:
        """The least real memory GFD reports for `profile` on nodes of `model` (MiB), if any does."""
        ...

    def has_model(self, model: str) -> bool:
        """Whether some node of the GPU model `model` is known (free or not, settled or not)."""
        ...

    def plugin_serves(self, resource: str) -> bool:
        """Whether some node's device plugin advertises `resource` (free or not)."""
        ...

    def advertising_nodes(self) -> frozenset[str]:
        """Nodes whose device plugin advertises GPUs (allocatable `nvidia.com/gpu` or `nvidia.com/mig-*`)."""
        ...


class Capacity(LabelCapacity, Protocol):
    """What the engine reads of free GPUs: node labels, and what DRA devices offer
    (policies.gpu.dra_inventory.WithDra). Which back-end can serve a MIG slice
    (policies.planning.backends): the device plugin by its resource name, a DeviceClass serving
    that name from DRA devices, or a DRA claim."""

    def dra_serves(self, resource: str) -> bool:
        """Whether a DeviceClass serves `resource` from DRA devices the cluster has (KEP-5004)."""
        ...

    @property
    def dra_known(self) -> bool:
        """Whether NVIDIA's DRA driver publishes GPUs in the cluster."""
        ...

    def dra_free(self, model: str, profile: str | None) -> int:
        """Free DRA devices of `model`: slices of `profile`, whole GPUs for None."""
        ...

    def dra_offers(self, profile: str | None) -> bool:
        """Whether NVIDIA's DRA driver publishes slices of `profile` (whole GPUs for None), free or not."""
        ...

    def dra_models(self, resource: str) -> frozenset[str | None] | None:
        """The models (None: one the catalog does not know) of the DRA devices a DeviceClass serves
        `resource` with, as the slices show; None where no device is known."""
        ...

    def dual_advertised(self) -> frozenset[str]:
        """Nodes whose GPUs both the device plugin and NVIDIA's DRA driver advertise."""
        ...


class NoCapacity:
    known = False
    dra_known = False

    def plugin_serves(self, resource: str) -> bool:
        return False

    def dra_serves(self, resource: str) -> bool:
        return False

    def dra_free(self, model: str, profile: str | None) -> int:
        return 0

    def dra_offers(self, profile: str | None) -> bool:
        return False

    def advertising_nodes(self) -> frozenset[str]:
        return frozenset()

    def dra_models(self, resource: str) -> frozenset[str | None] | None:
        return None

    def dual_advertised(self) -> frozenset[str]:
        return frozenset()

    def free(self, model: str, profile: str | None, resource: str) -> int:
        return 0

    def memory_mib(self, model: str, profile: str) -> int | None:
        return None

    def has_model(self, model: str) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """What a Node says of its GPUs: its name, product label, allocatable GPU resources in whole
    units, and the NVIDIA labels that qualify them (strategy, config state, memory). Made once per
    Node as the cluster view loads it."""

    name: str
    product: str | None
    allocatable: dict[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)


K = TypeVar("K")
Slot = tuple[str, str | None, str]  # (GPU model key, profile name or None for whole GPUs, resource)


class CapacityLedger:
    """Free GPU capacity per (model, profile), kept as running sums from node and pod events: a
    LabelCapacity (node labels say nothing of DRA: WithDra adds it, with no slice at all too).

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
        self._memory_on: dict[str, dict[tuple[str, str], int]] = {}  # node -> (model, profile) -> MiB
        self._memory: dict[tuple[str, str], dict[int, int]] = {}  # (model, profile) -> MiB -> nodes
        self._unsettled: set[str] = set()  # nodes being split anew (mig.config.state not success)
        self._model_of: dict[str, str] = {}  # node -> GPU model key
        self._model_nodes: dict[str, int] = {}  # GPU model key -> nodes
        self._advertising: set[str] = set()  # nodes whose device plugin advertises GPUs, any product

    def free(self, model: str, profile: str | None, resource: str) -> int:
        slot = (model, profile, resource)
        return max(0, self._capacity.get(slot, 0) - self._used.get(slot, 0))

    def memory_mib(self, model: str, profile: str) -> int | None:
        figures = self._memory.get((model, profile))
        return min(figures) if figures else None

    def has_model(self, model: str) -> bool:
        return model in self._model_nodes

    def plugin_serves(self, resource: str) -> bool:
        return any(slot[2] == resource for slot in self._capacity)

    def advertising_nodes(self) -> frozenset[str]:
        return frozenset(self._advertising)

    @property
    def unsettled(self) -> int:
        """Nodes being split anew, offering nothing until mig-manager reports success."""
        return len(self._unsettled)

    def nodes(self) -> list[str]:
        return list(self._slots)

    @property
    def known(self) -> bool:
        """Nodes were listed and some carry GPUs this catalog knows (no GPU Feature Discovery
        labels anywhere: nothing is known, rather than everything taken)."""
        return self._synced and bool(self._slots)

    def mark_synced(self) -> None:
        self._synced = True

    def set_node(self, node: NodeGpus) -> None:
        """What a Node says of its GPUs, as the cluster view reads it (node_gpus)."""
        name, product, allocatable, labels = node.name, node.product, node.allocatable, node.labels
        self.remove_node(name)
        if any(allocatable.values()):
            self._advertising.add(name)
        found = self.catalog.from_product_label(product) if product else None
        if found is None:
            found = gke_partition(labels, self.catalog)  # GKE's own split pools carry no GFD label
        if found is None:
            return
        self._model_of[name] = found[0].key
        _add(self._model_nodes, found[0].key, 1)
        state = labels.get(CONFIG_STATE_LABEL)
        if state is not None and state != SETTLED:
            self._unsettled.add(name)
            self._slots[name] = {}  # known, offering nothing
            self._allocatable[name] = {}
            return
        model, single_profile = found
        strategy = labels.get(STRATEGY_LABEL)
        slots: dict[str, Slot] = {}
        for resource, amount in allocatable.items():
            if resource == WHOLE_GPU_RESOURCE:
                if strategy == "mixed" and single_profile is not None:
                    continue  # a stale single-strategy label on a mixed node: trust neither
                slots[resource] = (model.key, single_profile.name if single_profile else None, resource)
            else:
                profile = self.catalog.profile_for_resource(resource)
                if profile is None or strategy == "single" or model.profile(profile) is None:
                    continue  # under single, leftovers of a mixed past; or no profile of this model
                slots[resource] = (model.key, profile, resource)
            _add(self._capacity, slots[resource], amount)
        self._slots[name] = slots
        self._allocatable[name] = dict(allocatable)
        for resource, amount in self._used_on.get(name, {}).items():
            if resource in slots:
                _add(self._used, slots[resource], amount)
        self._note_memory(name, model.key, single_profile.name if single_profile else None, labels)

    def _note_memory(self, name: str, model: str, single: str | None, labels: Mapping[str, str]) -> None:
        found: dict[tuple[str, str], int] = {}
        for profile in self.catalog.model(model).profiles:
            text = labels.get(memory_label(profile.name))
            if profile.name == single and text is None:
                text = labels.get(GPU_MEMORY_LABEL)  # single strategy: the device is the slice
            if text is not None and text.isdigit():
                found[(model, profile.name)] = int(text)
        for key, mib in found.items():
            counts = self._memory.setdefault(key, {})
            counts[mib] = counts.get(mib, 0) + 1
        if found:
            self._memory_on[name] = found

    def remove_node(self, name: str) -> None:
        self._advertising.discard(name)
        for key, mib in self._memory_on.pop(name, {}).items():
            counts = self._memory[key]
            counts[mib] -= 1
            if not counts[mib]:
                del counts[mib]
        slots = self._slots.pop(name, None)
        if slots is None:
            return
        _add(self._model_nodes, self._model_of.pop(name), -1)
        self._unsettled.discard(name)
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


def gke_partition(labels: Mapping[str, str], catalog: Catalog) -> tuple[GpuModel, Profile] | None:
    """The model and profile of a GKE node pool split into partitions (each one nvidia.com/gpu),
    from its accelerator and partition labels; None for any other node."""
    partition = labels.get(GKE_PARTITION)
    models = named_by(GKE_ACCELERATOR, labels.get(GKE_ACCELERATOR, ""))
    if not partition or not models or len(models) != 1 or not catalog.has_model(models[0]):
        return None
    model = catalog.model(models[0])
    profile = next((p for p in model.profiles if label_name(p.name) == partition), None)
    return (model, profile) if profile is not None else None


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


def node_gpus(raw: Mapping[str, Any]) -> NodeGpus:
    """What a Node says of its GPUs (the boundary for Nodes: anything unreadable counts as no GPU)."""
    metadata = raw.get("metadata") or {}
    allocatable = (raw.get("status") or {}).get("allocatable") or {}
    gpus: dict[str, int] = {}
    for resource, amount in allocatable.items():
        if resource == WHOLE_GPU_RESOURCE or str(resource).startswith(MIG_RESOURCE_PREFIX):
            try:
                gpus[str(resource)] = int(parse_quantity(amount))
            except (ValueError, TypeError, ArithmeticError):
                continue
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping):
        labels = {}
    nvidia = {str(k): v for k, v in labels.items() if str(k).startswith("nvidia.com/") and isinstance(v, str)}
    product = nvidia.get(PRODUCT_LABEL)
    return NodeGpus(str(metadata.get("name", "")), product, gpus, nvidia)


def _add(sums: dict[K, int], key: K, amount: int) -> None:
    total = sums.get(key, 0) + amount
    if total:
        sums[key] = total
    else:
        sums.pop(key, None)
