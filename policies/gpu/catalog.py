"""The GPU catalog: lookups over NVIDIA's models (policies.gpu.models) by key, profile, resource
name and node label; what a node's product label says it offers (NodeKind) and what an
nvidia.com/ resource is (GpuResource)."""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

from policies.gpu.cloud import gke_accelerators
from policies.gpu.devices import is_dra_gpu
from policies.gpu.models import (
    ALIASES,
    HAMI_RESOURCES,
    INVALID_SUFFIX,
    MIG_RESOURCE_PREFIX,
    MODELS,
    SHARED_RESOURCE_SUFFIX,
    SHARED_SUFFIX,
    WHOLE_GPU_RESOURCE,
    GpuModel,
    Profile,
    label_name,
)
from policies.memo import Memo


class CatalogError(ValueError):
    """An unknown model or profile; the message names the closest valid ones."""


def _closest(word: str, choices: list[str]) -> str:
    near = difflib.get_close_matches(word, choices, n=3, cutoff=0.5)
    return f"; closest: {', '.join(near)}" if near else ""


@dataclass(frozen=True, slots=True, eq=False)  # one object per label, compared by identity
class NodeKind:
    """What a node's nvidia.com/gpu.product label says it offers. `label` None is a node whose
    label the catalog does not know (or that has none): a whole GPU of any model, as far as
    anyone can tell."""

    label: str | None
    model: GpuModel | None = None
    profile: Profile | None = None  # single strategy: every GPU of the node split into this profile
    shared: bool = False  # time-sliced or MPS (`-SHARED`): each replica is a share of a device
    invalid: bool = False  # single strategy split unevenly (`-MIG-INVALID`): never a target
    partitioned: bool = False  # a GKE node pool split into `profile` (policies.gpu.cloud), no GFD label

    @property
    def split(self) -> bool:
        """Single strategy: nvidia.com/gpu on this node is a slice of `profile`."""
        return self.profile is not None


UNKNOWN_NODE = NodeKind(None)


class ResourceKind(enum.Enum):
    WHOLE = "whole"  # nvidia.com/gpu (and renamed forms): a whole GPU, or a slice on a split node
    MIG = "mig"  # nvidia.com/mig-<profile>: one MIG device (mixed strategy)
    SHARE = "share"  # HAMi's memory and core shares: no device of their own
    OTHER = "other"  # nvidia.com/ resources that are no GPU (network devices and the like)


# The GPU Operator's sandbox device plugin (KubeVirt virtual machines) names a passed-through GPU
# by its PCI device name (`nvidia.com/GA100_A100_PCIE_40GB`, `nvidia.com/TU104GL_Tesla_T4`) and a
# vGPU by its mediated device type (`nvidia.com/GRID_T4-1Q`, `nvidia.com/NVIDIA_A10-24Q`,
# `nvidia.com/GRID_A100-1-10C`, MIG-backed). Both are GPUs: a passthrough a whole one, a vGPU a
# time-sliced share of one (charged as `.shared` replicas are). Device plugin and HAMi names are
# lower case; these are not.
_VGPU = re.compile(r"^nvidia\.com/(?:GRID|NVIDIA)_[A-Za-z0-9]+(?:-\d+)*-\d+[A-Z]$")
_PASSTHROUGH = re.compile(r"^nvidia\.com/[A-Z0-9]+_[A-Za-z0-9_]+$")
# The GPU Operator's passthrough alias on Kata and confidential-container nodes (its sandbox device
# plugin's `P_GPU_ALIAS`; NVIDIA's NIM sample on confidential containers asks for it): a whole GPU.
PASSTHROUGH_ALIAS = "nvidia.com/pgpu"


# nvidia.com/ names of network devices, not GPUs: NVIDIA's Network Operator's own samples
# (Mellanox/network-operator `example/`: its SR-IOV pools `hostdev`, `mlnxnics`, `sriovlegacy`,
# `sriovswitchdev`, `sriov_rdma`, and the RDMA shared device plugin's `rdma_shared_device_a`/`_b`
# under `resourcePrefix: nvidia.com`), and any name a token of which names a NIC the way those
# pools are named (an admin names SR-IOV pools freely: `nvidia.com/ib_vf`, `nvidia.com/sriov_nic1`).
NETWORK_RESOURCES = frozenset(
    "nvidia.com/" + name
    for name in ("hostdev", "mlnxnics", "sriovlegacy", "sriovswitchdev", "sriov_rdma", "sriov")
    + ("rdma_shared_device_a", "rdma_shared_device_b", "sriov_network_device_plugin")
)
_NIC_TOKEN = re.compile(r"^(rdma|sriov|hostdev|mlnx|nic|netdev|roce|ib|vf|vfs|eth|ipoib)\d*")


def is_network_resource(name: str) -> bool:
    """Whether an nvidia.com/ name the catalog does not know is a network device's, not a GPU's."""
    if name in NETWORK_RESOURCES:
        return True
    local = name.partition("/")[2].lower()
    return any(_NIC_TOKEN.match(token) for token in re.split(r"[^a-z0-9]+", local) if token)


@lru_cache(maxsize=1024)  # a few names, read for every container of every pod
def resource_kind(name: str) -> ResourceKind:
    """What an extended resource is, from its name alone: the device plugin's (renamed ones
    included), the sandbox device plugin's passthrough and vGPU devices, HAMi's shares, or
    something else of NVIDIA's."""
    if name.startswith(MIG_RESOURCE_PREFIX):
        return ResourceKind.MIG
    if name == WHOLE_GPU_RESOURCE or name.startswith((WHOLE_GPU_RESOURCE + ".", WHOLE_GPU_RESOURCE + "-")):
        return ResourceKind.WHOLE
    if _VGPU.match(name) or _PASSTHROUGH.match(name) or name == PASSTHROUGH_ALIAS or is_dra_gpu(name):
        return ResourceKind.WHOLE
    return ResourceKind.SHARE if name in HAMI_RESOURCES else ResourceKind.OTHER


def is_vgpu(name: str) -> bool:
    return _VGPU.match(name) is not None


def is_sandbox_device(name: str) -> bool:
    """A passed-through GPU or a vGPU of the sandbox device plugin, or a DRA extended resource of
    an NVIDIA GPU class: what it is does not depend on the node's MIG labels."""
    return (
        _VGPU.match(name) is not None
        or _PASSTHROUGH.match(name) is not None
        or name == PASSTHROUGH_ALIAS
        or is_dra_gpu(name)
    )


@dataclass(frozen=True, slots=True)
class GpuResource:
    name: str
    kind: ResourceKind
    profile: str | None = None  # MIG: the catalog's profile name; None when the catalog does not know it
    written: str = ""  # MIG: the profile as the resource name writes it
    shared: bool = False  # `.shared`: a time-sliced replica of the device, not the device
    sandbox: bool = False  # a passthrough or vGPU device of a virtual machine: what it is, anywhere

    @property
    def device(self) -> bool:
        return self.kind in (ResourceKind.WHOLE, ResourceKind.MIG)


@dataclass(frozen=True, slots=True)
class Catalog:
    models: tuple[GpuModel, ...] = MODELS
    _by_key: dict[str, GpuModel] = field(init=False, repr=False, compare=False)
    _by_label: dict[str, NodeKind] = field(init=False, repr=False, compare=False)
    _kinds: tuple[NodeKind, ...] = field(init=False, repr=False, compare=False)
    _profile_names: list[str] = field(init=False, repr=False, compare=False)
    _resource_names: dict[str, str] = field(init=False, repr=False, compare=False)
    _resources: Memo = field(init=False, repr=False, compare=False)  # resource names come from pods
    _offering: dict[str, tuple[GpuModel, ...]] = field(init=False, repr=False, compare=False)
    memo: Memo = field(init=False, repr=False, compare=False)  # derived values (placement)

    def __post_init__(self) -> None:
        by_key = {model.key: model for model in self.models}
        by_key.update({alias: by_key[key] for alias, key in ALIASES.items()})
        by_label: dict[str, NodeKind] = {}
        by_resource: dict[str, list[Profile]] = {}
        for model in self.models:
            for label in model.whole_labels(legacy=True):
                by_label[label] = NodeKind(label, model, shared=label.endswith(SHARED_SUFFIX))
            for label in model.base_labels(legacy=True):
                by_label[label + INVALID_SUFFIX] = NodeKind(label + INVALID_SUFFIX, model, invalid=True)
            for profile in model.profiles:
                for label in model.single_strategy_labels(profile, legacy=True):
                    by_label[label] = NodeKind(label, model, profile, shared=label.endswith(SHARED_SUFFIX))
                by_resource.setdefault(profile.resource, []).append(profile)
        partitions = tuple(
            NodeKind(None, by_key[key], profile, partitioned=True)
            for key in dict.fromkeys(k for keys in gke_accelerators().values() for k in keys)
            if key in by_key
            for profile in by_key[key].profiles
        )
        object.__setattr__(self, "_by_key", by_key)
        object.__setattr__(self, "_by_label", by_label)
        object.__setattr__(self, "_kinds", (*by_label.values(), *partitions, UNKNOWN_NODE))
        object.__setattr__(self, "_profile_names", sorted({p.name for m in self.models for p in m.profiles}))
        object.__setattr__(self, "_resource_names", {r: ps[0].name for r, ps in by_resource.items()})
        object.__setattr__(self, "_resources", Memo(1024))
        offering: dict[str, list[GpuModel]] = {}
        for model in self.models:
            for profile in model.profiles:
                offering.setdefault(profile.name, []).append(model)
        object.__setattr__(self, "_offering", {name: tuple(models) for name, models in offering.items()})
        object.__setattr__(self, "memo", Memo())

    def node_kind(self, label: str) -> NodeKind | None:
        """The kind of node a nvidia.com/gpu.product value names; None for a label the catalog does not know."""
        return self._by_label.get(label)

    @property
    def node_kinds(self) -> tuple[NodeKind, ...]:
        """Every kind of node the catalog knows (by GFD's label, and GKE's partitioned pools), and
        a node of a label it does not (UNKNOWN_NODE)."""
        return self._kinds

    def resource(self, name: str) -> GpuResource:
        """What an extended resource under nvidia.com/ is (names are few: each is worked out once)."""
        return self._resources.get(name, lambda: self._classify(name))

    def _classify(self, name: str) -> GpuResource:
        kind = resource_kind(name)
        if kind is ResourceKind.MIG:
            shared = name.endswith(SHARED_RESOURCE_SUFFIX)
            base = name.removesuffix(SHARED_RESOURCE_SUFFIX) if shared else name
            written = base.removeprefix(MIG_RESOURCE_PREFIX)
            return GpuResource(name, kind, self._resource_names.get(base), written, shared)
        shared = name == WHOLE_GPU_RESOURCE + SHARED_RESOURCE_SUFFIX or is_vgpu(name)
        return GpuResource(name, kind, shared=shared, sandbox=is_sandbox_device(name))

    def closest_resources(self, written: str) -> str:
        """`; closest: nvidia.com/mig-...` for a profile (as resource names write it) no model has."""
        near = difflib.get_close_matches(written, [label_name(p) for p in self._profile_names], n=3, cutoff=0.5)
        return f"; closest: {', '.join(MIG_RESOURCE_PREFIX + n for n in near)}" if near else ""

    def model(self, key: str) -> GpuModel:
        found = self._by_key.get(key)
        if found is None:
            raise CatalogError(f"unknown GPU model {key!r}{_closest(key, sorted(self._by_key))}")
        return found

    def has_model(self, key: str) -> bool:
        return key in self._by_key

    def check_profile(self, name: str, models: tuple[GpuModel, ...] = ()) -> None:
        """Raise CatalogError unless `name` is a profile of one of `models` (any model if none)."""
        pool = models or self.models
        names = sorted({p.name for m in pool for p in m.profiles})
        if name not in names:
            where = f" on {', '.join(m.key for m in models)}" if models else ""
            raise CatalogError(f"unknown MIG profile {name!r}{where}{_closest(name, names)}")

    @property
    def mig_resources(self) -> Mapping[str, str]:
        """Every mixed-strategy resource name the catalog knows (e.g. nvidia.com/mig-1g.10gb.me),
        with the profile behind it."""
        return self._resource_names

    def profile_for_resource(self, resource: str) -> str | None:
        """The profile name behind a mixed-strategy resource name, e.g. nvidia.com/mig-1g.10gb.me."""
        return self._resource_names.get(resource)

    def from_product_label(self, label: str) -> tuple[GpuModel, Profile | None] | None:
        """The model (and, under the single strategy, the profile) of a node's product label; None
        for a label the catalog does not know or one whose node is split unevenly."""
        kind = self._by_label.get(label)
        if kind is None or kind.model is None or kind.invalid:
            return None
        return kind.model, kind.profile

    def models_with(self, profile_name: str) -> tuple[GpuModel, ...]:
        return self._offering.get(profile_name, ())

    def weight(self, profile_name: str, preferred: tuple[GpuModel, ...] = ()) -> Fraction:
        """GPU-equivalent of a profile: on the first preferred model that has it, else the first model."""
        for model in (*preferred, *self.models):
            profile = model.profile(profile_name)
            if profile is not None:
                return model.weight(profile)
        raise CatalogError(f"unknown MIG profile {profile_name!r}{_closest(profile_name, self._profile_names)}")


CATALOG = Catalog()
