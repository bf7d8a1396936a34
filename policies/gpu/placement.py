"""Where a pod can run, as far as GPUs go, and what each of its GPU resources costs there.

A pod's `nodeSelector` and required node affinity (terms OR'ed, expressions AND'ed, as the
scheduler reads them) admit some kinds of node: the catalog's, by the `nvidia.com/gpu.product`
label GPU Feature Discovery writes (and `nvidia.com/mig.strategy` and
`nvidia.com/gpu.sharing-strategy`, which follow from it: `-SHARED` nodes share by time-slicing or
MPS), and nodes whose label the catalog does not know. Every requirement is read as "may this kind of node
satisfy it": an expression on any other label may, so it never narrows. The pod is charged
the most one unit of each resource could hold on any admitted kind (Kubernetes semantics on the
labels that tell GPUs apart, an over-estimate everywhere else):

- `nvidia.com/gpu` is a whole GPU (1 GPU-equivalent, 1 whole GPU) wherever a node it may land on
  is not split under the single strategy, a term says nothing about the product included; only
  a pod confined to split nodes holds a slice, of the heaviest profile among them;
- `nvidia.com/mig-<profile>` weighs what it weighs on the heaviest GPU family that has the
  profile and that the pod may land on (`1g.24gb`: 1/7 of an H100 NVL, 1/4 of an RTX PRO 6000);
- a share (`.shared` resources, HAMi's vGPUs, or a pod confined to `-SHARED` nodes) is charged
  as a share of the device: the policy may weigh shares less (`quota.sharedWeight`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

import orjson

from policies.errors import InputError
from policies.gpu.catalog import UNKNOWN_NODE, Catalog, GpuResource, NodeKind, ResourceKind
from policies.gpu.cloud import ACCELERATOR_LABELS, CLOUD_LABELS, GKE_ACCELERATOR, GKE_PARTITION, named_by, naming
from policies.gpu.models import PRODUCT_LABEL, SHARING_LABEL, STRATEGY_LABEL, GpuModel, label_name

OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
# The labels that tell GPU nodes apart: GFD's, and the cloud providers' (policies.gpu.cloud).
_READ = frozenset({PRODUCT_LABEL, STRATEGY_LABEL, SHARING_LABEL, *CLOUD_LABELS})
_SHARING = frozenset({"time-slicing", "mps"})


class Requirement(NamedTuple):
    key: str
    operator: str
    values: frozenset[str] = frozenset()


Term = tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class Placement:
    """Required node constraints on the labels that tell GPU nodes apart. `terms` None: no
    required node affinity. A term the scheduler could never satisfy (no expression at all) is
    dropped; one with expressions only on other labels stays, as `()`: it may admit any node."""

    selector: Term = ()
    terms: tuple[Term, ...] | None = None

    @property
    def says_nothing(self) -> bool:
        return not self.selector and self.terms is None


ANYWHERE = Placement()


def _strategies(kind: NodeKind, key: str) -> frozenset[str] | None:
    """The values `key` may have on a kind of node (None: any)."""
    if kind.label is None:
        return None  # anything
    if key == SHARING_LABEL:
        return _SHARING if kind.shared else frozenset({"none"})
    return frozenset({"single"}) if kind.split or kind.invalid else frozenset({"none", "mixed"})


def _on(held: frozenset[str], op: str, values: frozenset[str]) -> bool:
    """Whether a label known to hold exactly `held` (empty: absent) satisfies one requirement."""
    if op == "In":
        return bool(held & values)
    if op == "NotIn":
        return not held or bool(held - values)
    if op == "Exists":
        return bool(held)
    return op == "DoesNotExist" and not held


def _may_hold_cloud(requirement: Requirement, kind: NodeKind) -> bool:
    """A provider's label on a kind of node. A GKE partitioned pool carries its profile, and of
    the accelerator labels only GKE's; no other node carries a partition label (GKE writes it on
    the pools it splits, and tenants label no node). A node of an unknown label may carry any
    accelerator value; one of a known model, any value that may name it or that is unknown here."""
    op, values, key = requirement.operator, requirement.values, requirement.key
    if key == GKE_PARTITION:
        held = frozenset({label_name(kind.profile.name)}) if kind.partitioned and kind.profile else frozenset()
        return _on(held, op, values)
    if kind.model is None:
        return True
    if kind.partitioned and key != GKE_ACCELERATOR:
        return _on(frozenset(), op, values)
    if op == "In":
        return any(named_by(key, v) is None for v in values) or bool(values & naming(key, kind.model.key))
    return op != "DoesNotExist" or not kind.partitioned


def _may_hold(requirement: Requirement, kind: NodeKind, catalog: Catalog) -> bool:
    op, values = requirement.operator, requirement.values
    if requirement.key in CLOUD_LABELS:
        return _may_hold_cloud(requirement, kind)
    if requirement.key == PRODUCT_LABEL:
        if kind.label is None:  # an unknown label, or none: any of them
            return op != "In" or any(catalog.node_kind(v) is None for v in values)
        if op in ("Gt", "Lt"):
            return False  # product names are no integers
        return {"In": kind.label in values, "NotIn": kind.label not in values, "Exists": True}.get(op, False)
    possible = _strategies(kind, requirement.key)
    if possible is None:
        return True
    if op == "In":
        return bool(possible & values)
    if op == "NotIn":
        return bool(possible - values)
    return op == "Exists"


def admits(placement: Placement, kind: NodeKind, catalog: Catalog) -> bool:
    if not all(_may_hold(r, kind, catalog) for r in placement.selector):
        return False
    if placement.terms is None:
        return True
    return any(all(_may_hold(r, kind, catalog) for r in term) for term in placement.terms)


def admitted(placement: Placement, catalog: Catalog) -> tuple[NodeKind, ...]:
    """The kinds of node the placement may admit; every kind when it admits none at all (a pod
    that can run nowhere holds nothing, but is charged as if it could run anywhere)."""

    def build() -> tuple[NodeKind, ...]:
        kinds = tuple(k for k in catalog.node_kinds if admits(placement, k, catalog))
        return kinds or catalog.node_kinds

    if placement.says_nothing:
        return catalog.node_kinds
    return catalog.memo.get(("admitted", placement), build)


def _asks_sharing(term: Term) -> bool:
    """GFD labels every GPU node's sharing strategy, whatever its product: a term requiring
    time-slicing or MPS there lands only on sharing nodes, known products or not."""
    return any(r.key == SHARING_LABEL and r.operator == "In" and r.values <= _SHARING for r in term)


def only_shared(placement: Placement, catalog: Catalog) -> bool:
    """Whether every node the pod may land on shares its GPUs (time-slicing or MPS)."""
    if placement.says_nothing:
        return False
    if _asks_sharing(placement.selector) or (placement.terms and all(_asks_sharing(t) for t in placement.terms)):
        return True
    return catalog.memo.get(("shared", placement), lambda: all(k.shared for k in admitted(placement, catalog)))


def families(placement: Placement, catalog: Catalog, offering: tuple[GpuModel, ...]) -> tuple[GpuModel, ...]:
    """Of the models `offering` a MIG resource, those whose (unsplit) nodes the pod may land on;
    all of them where it may land on a node of a label the catalog does not know."""

    def build() -> tuple[GpuModel, ...]:
        kinds = admitted(placement, catalog)
        if UNKNOWN_NODE in kinds:
            return offering
        reachable = {k.model for k in kinds if not k.split and not k.invalid}
        return tuple(m for m in offering if m in reachable) or offering

    return catalog.memo.get(("families", placement, offering), build)


class CloudPin(NamedTuple):
    """The provider's GPU a pod is pinned to by a cloud label (policies.gpu.cloud)."""

    key: str
    values: tuple[str, ...]
    models: tuple[str, ...]  # the catalog (MIG-capable) models the values name; () for GPUs without MIG
    partition: str | None = None  # the GKE partition (a profile as labels write it) the pod asks for


def cloud_pin(placement: Placement) -> CloudPin | None:
    """The GPU a pod's own constraints pin it to by a provider's label: every way it may be
    scheduled (each affinity term, with the nodeSelector) requires one, by values all known here.
    None where some way names none (the pod may land on any GPU there)."""
    terms = [placement.selector] if placement.terms is None else [placement.selector + t for t in placement.terms]
    if not terms or placement.says_nothing:
        return None
    partitions: set[str] = set()
    partitioned = 0  # terms that require a GKE partition
    pins: list[Requirement] = []
    for term in terms:
        parts = [r for r in term if r.key == GKE_PARTITION and r.operator == "In"]
        accelerators = [r for r in term if r.key in ACCELERATOR_LABELS and r.operator == "In"]
        if not accelerators and not parts:
            return None
        if parts:
            partitioned += 1
            partitions.update(parts[0].values)
        pins.extend(accelerators[:1])
    if partitioned == len(terms) and len(partitions) == 1:
        values = tuple(sorted({v for r in pins for v in r.values}))
        return CloudPin(pins[0].key if pins else GKE_PARTITION, values, (), partitions.pop())
    if len(pins) != len(terms):
        return None
    named = [(r.key, v, named_by(r.key, v)) for r in pins for v in sorted(r.values)]
    if any(models is None for _, _, models in named):
        return None
    models = tuple(dict.fromkeys(m for _, _, found in named for m in found or ()))
    return CloudPin(pins[0].key, tuple(dict.fromkeys(v for _, v, _ in named)), models)


class Charge(NamedTuple):
    """What one unit of a resource holds at most, wherever the pod may land."""

    weight: Fraction  # GPU-equivalents
    gpus: int  # whole GPUs
    slices: frozenset[str]  # profiles it may be a slice of
    shared: bool  # a share of the device on every node it may land on


NOTHING = Charge(Fraction(0), 0, frozenset(), False)


def unit_charge(resource: GpuResource, placement: Placement, catalog: Catalog, hami: bool = False) -> Charge:
    if not resource.device:
        return NOTHING
    return catalog.memo.get(("charge", resource, placement, hami), lambda: _charge(resource, placement, catalog, hami))


def _charge(resource: GpuResource, placement: Placement, catalog: Catalog, hami: bool) -> Charge:
    if resource.sandbox:  # a VM's whole GPU (passthrough) or share of one (vGPU), whatever the node says
        return Charge(Fraction(1), 1, frozenset(), resource.shared)
    kinds = admitted(placement, catalog)
    if resource.kind is ResourceKind.WHOLE:
        shared = resource.shared or hami or all(k.shared for k in kinds)
        if any(not k.split for k in kinds):
            return Charge(Fraction(1), 1, frozenset(), shared)
        weights = [k.model.weight(k.profile) for k in kinds if k.model and k.profile]
        return Charge(max(weights), 0, frozenset(k.profile.name for k in kinds if k.profile), shared)
    if resource.profile is None:  # a MIG resource the catalog does not know: a whole GPU's worth, never zero
        return Charge(Fraction(1), 0, frozenset({resource.written}), resource.shared)
    models = families(placement, catalog, catalog.models_with(resource.profile))
    weight = max(m.weight(p) for m in models if (p := m.profile(resource.profile)) is not None)
    landing = [k for k in kinds if k.model in models and not k.split]
    shared = resource.shared or (UNKNOWN_NODE not in kinds and bool(landing) and all(k.shared for k in landing))
    return Charge(weight, 0, frozenset({resource.profile}), shared)


# -- the boundary: a pod spec's constraints, read with their field paths -----------------------


def _requirement(raw: object, path: str) -> Requirement | None:
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be an object")
    key, operator, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
    if not isinstance(key, str):
        raise InputError(f"{path}.key", "must be a string")
    if not isinstance(operator, str) or operator not in OPERATORS:
        raise InputError(f"{path}.operator", f"must be one of {', '.join(sorted(OPERATORS))}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InputError(f"{path}.values", "must be a list of strings")
    return Requirement(key, str(operator), frozenset(values)) if key in _READ else None


def parse_placement(spec: Mapping[str, object], selector: Mapping[str, str]) -> Placement:
    """The placement of a pod spec (its nodeSelector already read); InputError names a malformed field."""
    pinned = tuple(Requirement(k, "In", frozenset({v})) for k, v in selector.items() if k in _READ)
    affinity = spec.get("affinity")
    if affinity is None:
        return Placement(pinned) if pinned else ANYWHERE
    # Pods of one template repeat one affinity: read each once (keyed by its JSON, so a malformed
    # one, which raises, is never kept).
    try:
        text = orjson.dumps(affinity)
    except TypeError:  # not JSON as the API server could hold it (an integer past 64 bits)
        return _read_affinity(affinity, pinned)
    return _affinity_placement(text, pinned)


@lru_cache(maxsize=4096)
def _affinity_placement(affinity: bytes, pinned: Term) -> Placement:
    return _read_affinity(orjson.loads(affinity), pinned)


def _read_affinity(affinity: object, pinned: Term) -> Placement:
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = _field(_field(affinity, "nodeAffinity", "spec.affinity"), path.rsplit(".", 1)[1], path.rsplit(".", 1)[0])
    terms_raw = _field(required, "nodeSelectorTerms", path)
    if terms_raw is None:
        return Placement(pinned) if pinned else ANYWHERE
    if not isinstance(terms_raw, list):
        raise InputError(f"{path}.nodeSelectorTerms", "must be a list")
    terms: list[Term] = []
    for i, raw in enumerate(terms_raw):
        where = f"{path}.nodeSelectorTerms[{i}]"
        if not isinstance(raw, Mapping):
            raise InputError(where, "must be an object")
        expressions, fields = raw.get("matchExpressions") or [], raw.get("matchFields") or []
        if not isinstance(expressions, list) or not isinstance(fields, list):
            raise InputError(where, "matchExpressions and matchFields must be lists")
        if not expressions and not fields:
            continue  # matches no node
        read = (_requirement(e, f"{where}.matchExpressions[{j}]") for j, e in enumerate(expressions))
        terms.append(tuple(r for r in read if r is not None))
    return Placement(pinned, tuple(dict.fromkeys(terms)))


def _field(raw: object, key: str, path: str) -> object:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be an object")
    return raw.get(key)
