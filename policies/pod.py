"""The boundary for Pods: a raw Pod (JSON) becomes a frozen PodView the engine decides on.

Only what GPU admission needs is read; malformed fields raise InputError with their path.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import NamedTuple

from policies.errors import InputError
from policies.gpu.catalog import MIG_RESOURCE_PREFIX, PRODUCT_LABEL, WHOLE_GPU_RESOURCE
from policies.quantity import QuantityParser

ANNOTATION_PREFIX = "gpu-admission.io/"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SHM_PATH = "/dev/shm"
GPU_RESOURCE_DOMAIN = "nvidia.com/"


# NamedTuples, not frozen dataclasses: as immutable, and built on every review for a quarter of
# the cost (a frozen dataclass sets each field through object.__setattr__).
class ContainerView(NamedTuple):
    position: int  # in spec.containers or spec.initContainers (a NamedTuple has an index method)
    name: str
    init: bool
    requests: Mapping[str, Decimal]
    limits: Mapping[str, Decimal]
    env: Mapping[str, str | None]
    mounts_shm: bool
    restart_always: bool

    @property
    def path(self) -> str:
        return _container_path(self.init, self.position)

    def amount(self, resource: str) -> Decimal | None:
        """limits win, as the API server defaults requests from limits for extended resources."""
        if resource in self.limits:
            return self.limits[resource]
        return self.requests.get(resource)

    @property
    def wants_whole_gpu(self) -> bool:
        return WHOLE_GPU_RESOURCE in self.requests or WHOLE_GPU_RESOURCE in self.limits

    def mig_resources(self) -> dict[str, Decimal]:
        names = {r for r in (*self.requests, *self.limits) if r.startswith(MIG_RESOURCE_PREFIX)}
        return {name: self.amount(name) or Decimal(0) for name in names}

    @property
    def holds_gpu(self) -> bool:
        return self.wants_whole_gpu or any(r.startswith(MIG_RESOURCE_PREFIX) for r in (*self.requests, *self.limits))


class PodView(NamedTuple):
    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    containers: tuple[ContainerView, ...]
    init_containers: tuple[ContainerView, ...]
    node_selector: Mapping[str, str]
    runtime_class_name: str | None
    volume_names: frozenset[str]
    phase: str | None
    deleting: bool
    required_products: tuple[str, ...] = ()
    node_name: str | None = None
    uid: str = ""

    @property
    def mirror(self) -> bool:
        return MIRROR_ANNOTATION in self.annotations

    def annotation(self, name: str) -> str | None:
        return self.annotations.get(ANNOTATION_PREFIX + name)

    @property
    def in_scope(self) -> bool:
        """What gpu-admission acts on: GPU pods and pods asking for Triton, never mirror pods."""
        return not self.mirror and (self.holds_gpu or self.annotation("triton") == "inject")

    @property
    def all_containers(self) -> tuple[ContainerView, ...]:
        return self.init_containers + self.containers

    @property
    def holds_gpu(self) -> bool:
        return any(c.holds_gpu for c in self.all_containers)


@lru_cache(maxsize=256)
def _container_path(init: bool, index: int) -> str:
    return f"spec.{'initContainers' if init else 'containers'}[{index}]"


def _mapping(raw: object, path: str) -> Mapping[str, object]:
    if type(raw) is dict:  # what JSON decodes to; the ABC check below costs ten times more
        return raw
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be an object")
    return raw


def _string_map(raw: object, path: str) -> dict[str, str]:
    fields = _mapping(raw, path)
    for key, value in fields.items():
        if not isinstance(value, str):
            raise InputError(f"{path}.{key}", "must be a string")
    return dict(fields)  # type: ignore[arg-type]


def _list(raw: object, path: str) -> list[object]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError(path, "must be a list")
    return raw


def _quantities(raw: object, path: str, parse: QuantityParser) -> dict[str, Decimal]:
    """GPU resources only: the API server validates the rest, and parsing is the costly part."""
    parsed: dict[str, Decimal] = {}
    for resource, value in _mapping(raw, path).items():
        if not resource.startswith(GPU_RESOURCE_DOMAIN):
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InputError(f"{path}.{resource}", f"{value!r} is not a quantity")
        try:
            parsed[resource] = parse(value)
        except (ValueError, TypeError, ArithmeticError):
            raise InputError(f"{path}.{resource}", f"{value!r} is not a quantity") from None
    return parsed


def _env(fields: Mapping[str, object], path: str) -> dict[str, str | None]:
    env: dict[str, str | None] = {}
    for i, item in enumerate(_list(fields.get("env"), f"{path}.env")):
        entry = _mapping(item, f"{path}.env[{i}]")
        name = entry.get("name")
        if not isinstance(name, str):
            raise InputError(f"{path}.env[{i}].name", "must be a string")
        value = entry.get("value")
        env[name] = value if isinstance(value, str) else None
    return env


def _mounts_shm(fields: Mapping[str, object], path: str) -> bool:
    mounts = _list(fields.get("volumeMounts"), f"{path}.volumeMounts")
    return any(
        _mapping(m, f"{path}.volumeMounts[{i}]").get("mountPath") in (SHM_PATH, SHM_PATH + "/")
        for i, m in enumerate(mounts)
    )


def _container(raw: object, index: int, init: bool, parse: QuantityParser) -> ContainerView:
    path = _container_path(init, index)
    fields = _mapping(raw, path)
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{path}.name", "every container needs a name")
    resources = _mapping(fields.get("resources"), f"{path}.resources")
    requests = _quantities(resources.get("requests"), f"{path}.resources.requests", parse)
    limits = _quantities(resources.get("limits"), f"{path}.resources.limits", parse)
    # env and mounts only matter where runtime settings go: containers that hold GPUs.
    gpu = bool(requests or limits)
    return ContainerView(
        position=index,
        name=name,
        init=init,
        requests=requests,
        limits=limits,
        env=_env(fields, path) if gpu else {},
        mounts_shm=_mounts_shm(fields, path) if gpu else False,
        restart_always=fields.get("restartPolicy") == "Always",
    )


def _required_products(spec: Mapping[str, object], selector: Mapping[str, str]) -> tuple[str, ...]:
    """nvidia.com/gpu.product values the pod is pinned to, by nodeSelector or required node affinity."""
    if PRODUCT_LABEL in selector:
        return (selector[PRODUCT_LABEL],)
    affinity = spec.get("affinity")
    try:
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]  # type: ignore[index]
        values: dict[str, None] = {}
        for term in terms:
            for expression in term.get("matchExpressions") or []:
                if expression.get("key") == PRODUCT_LABEL and expression.get("operator") == "In":
                    values.update(dict.fromkeys(expression.get("values") or []))
        return tuple(values)
    except (KeyError, TypeError, AttributeError):
        return ()


def parse_pod(raw: object, parse_quantity: QuantityParser) -> PodView:
    """A PodView of a Pod's JSON, or of a pod template (metadata + spec) when namespace is given."""
    pod = _mapping(raw, "")
    metadata = _mapping(pod.get("metadata"), "metadata")
    spec = _mapping(pod.get("spec"), "spec")
    containers = _list(spec.get("containers"), "spec.containers")
    init_containers = _list(spec.get("initContainers"), "spec.initContainers")
    volumes = _list(spec.get("volumes"), "spec.volumes")
    status = _mapping(pod.get("status"), "status")
    runtime_class = spec.get("runtimeClassName")
    node_name = spec.get("nodeName")
    node_selector = _string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    return PodView(
        name=str(metadata.get("name") or metadata.get("generateName") or ""),
        namespace=str(metadata.get("namespace") or ""),
        labels=_string_map(metadata.get("labels"), "metadata.labels"),
        annotations=_string_map(metadata.get("annotations"), "metadata.annotations"),
        containers=tuple(_container(c, i, False, parse_quantity) for i, c in enumerate(containers)),
        init_containers=tuple(_container(c, i, True, parse_quantity) for i, c in enumerate(init_containers)),
        node_selector=node_selector,
        runtime_class_name=runtime_class if isinstance(runtime_class, str) else None,
        volume_names=frozenset(str(_mapping(v, f"spec.volumes[{i}]").get("name")) for i, v in enumerate(volumes)),
        phase=status.get("phase") if isinstance(status.get("phase"), str) else None,  # type: ignore[arg-type]
        deleting=metadata.get("deletionTimestamp") is not None,
        required_products=_required_products(spec, node_selector),
        node_name=node_name if isinstance(node_name, str) and node_name else None,
        uid=str(metadata.get("uid") or ""),
    )
