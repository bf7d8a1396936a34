"""Containers as the engine reads them.

Every field is the requester's to write: quantities of nvidia.com/ resources follow Kubernetes'
grammar exactly and must be whole; the device env each container sets is collected wherever it
is (policies.judge.security judges it). Malformed fields raise InputError with their path, which
is built only when something is wrong (pods are read on every review).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import NamedTuple

from policies.errors import InputError
from policies.gpu.catalog import ResourceKind, resource_kind
from policies.gpu.devices import DEVICE_ENV, DEVICE_ENV_PREFIXES, TOOLKIT_ENV, as_set, is_dra_gpu, legacy_cause
from policies.gpu.models import WHOLE_GPU_RESOURCE
from policies.json_fields import json_list, mapping
from policies.quantity import parse_quantity

SHM_PATH = "/dev/shm"
_SHM_PATHS = (SHM_PATH, SHM_PATH + "/")
GPU_RESOURCE_DOMAIN = "nvidia.com/"
_GPU_KINDS = (ResourceKind.WHOLE, ResourceKind.MIG, ResourceKind.SHARE)


class DeviceEnv(NamedTuple):
    path: str  # e.g. spec.containers[0].env[2]
    name: str
    value: str | None  # None: from valueFrom, not knowable at admission
    legacy: bool = False  # the variable that makes the container a legacy CUDA image (every GPU)


class ContainerView:
    """One container as read. Made for every container of every review: a plain class, never
    changed once made (the value-class rule, docs/architecture.md)."""

    __slots__ = ("position", "name", "init", "requests", "limits", "env", "mounts_shm", "restart_always", "gpus")

    def __init__(
        self,
        position: int,  # in spec.containers or spec.initContainers
        name: str,
        init: bool,
        requests: Mapping[str, Decimal],  # nvidia.com/ resources only, whole and non-negative
        limits: Mapping[str, Decimal],
        env: Mapping[str, str | None],
        mounts_shm: bool,
        restart_always: bool,
        gpus: Mapping[str, Decimal] | None = None,  # every GPU resource (devices, shares) it holds some of
    ) -> None:
        self.position = position
        self.name = name
        self.init = init
        self.requests = requests
        self.limits = limits
        self.env = env
        self.mounts_shm = mounts_shm
        self.restart_always = restart_always
        self.gpus: Mapping[str, Decimal] = {} if gpus is None else gpus

    def _fields(self) -> tuple[object, ...]:
        return (
            self.position,
            self.name,
            self.init,
            self.requests,
            self.limits,
            self.env,
            self.mounts_shm,
            self.restart_always,
            self.gpus,
        )

    def __eq__(self, other: object) -> bool:  # and so unhashable, as its maps are
        return isinstance(other, ContainerView) and self._fields() == other._fields()

    def __repr__(self) -> str:
        return f"ContainerView({self.path}, {self.name!r})"

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
        """Asks for nvidia.com/gpu (`0` is no request: Ray heads and others write it)."""
        return bool(self.limits.get(WHOLE_GPU_RESOURCE) or self.requests.get(WHOLE_GPU_RESOURCE))

    @property
    def holds_gpu(self) -> bool:
        return bool(self.gpus)


@lru_cache(maxsize=256)
def _container_path(init: bool, index: int) -> str:
    return f"spec.{'initContainers' if init else 'containers'}[{index}]"


def string_map(raw: object, path: str) -> dict[str, str]:
    fields = mapping(raw, path)
    for key, value in fields.items():
        if not isinstance(value, str):
            raise InputError(f"{path}.{key}", "must be a string")
    return dict(fields)  # type: ignore[arg-type]


def _quantities(raw: object, container: str, section: str, others: dict[str, int] | None = None) -> dict[str, Decimal]:
    """nvidia.com/ resources only (the API server validates the rest, and parsing is the costly
    part): extended resources, so whole and non-negative. Field paths are made only when wrong.
    `others`: where other extended resources (names with a domain) go, any a DRA DeviceClass may
    serve (KEP-5004); one the API server would refuse is left to it."""
    parsed: dict[str, Decimal] = {}
    if raw is None or raw == {}:
        return parsed
    path = ""
    for resource, value in (raw if type(raw) is dict else mapping(raw, f"{container}.resources.{section}")).items():
        if not resource.startswith(GPU_RESOURCE_DOMAIN) and not is_dra_gpu(resource):
            if others is not None and "/" in resource:
                _other(resource, value, others)
            continue
        path = f"{container}.resources.{section}"
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InputError(f"{path}.{resource}", f"{value!r} is not a quantity")
        try:
            amount = parse_quantity(value)
        except (ValueError, TypeError, ArithmeticError) as error:
            raise InputError(f"{path}.{resource}", f"{value!r} is not a Kubernetes quantity ({error})") from None
        if amount < 0 or amount % 1:
            raise InputError(f"{path}.{resource}", f"{value!r}: extended resources are whole numbers, 0 or more")
        parsed[resource] = amount
    return parsed


def _other(resource: str, value: object, others: dict[str, int]) -> None:
    try:
        amount = parse_quantity(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    except (ValueError, TypeError, ArithmeticError):
        return
    if amount is not None and amount > 0:
        others[resource] = max(others.get(resource, 0), math.ceil(amount))


def _env(fields: Mapping[str, object], path: str, gpu: bool, found: list[DeviceEnv]) -> dict[str, str | None]:
    """The container's env (kept for GPU containers, where runtime settings go); the toolkit's
    variables of every container are collected into `found`: each device variable that grants
    (even one a later entry of the name takes back: the native checks cannot tell which entry is
    last within their cost bound, and no pod needs both), and the one that makes the container a
    legacy CUDA image, read by the values it ends with (kubelet keeps the last of a name)."""
    env: dict[str, str | None] = {}
    last: dict[str, tuple[int, str | None]] = {}  # a legacy-rule variable: its last entry and value
    for i, item in enumerate(json_list(fields.get("env"), f"{path}.env")):
        entry = item if type(item) is dict else mapping(item, f"{path}.env[{i}]")  # the path only when wrong
        name = entry.get("name")
        if not isinstance(name, str):
            raise InputError(f"{path}.env[{i}].name", "must be a string")
        value = entry.get("value")
        text = value if isinstance(value, str) else None
        if name in TOOLKIT_ENV:  # a value from valueFrom cannot be known here: None
            set_to = "" if value is None and "valueFrom" not in entry else text
            if name in DEVICE_ENV:
                found.append(DeviceEnv(f"{path}.env[{i}]", name, set_to))
            last[name] = (i, set_to)
        if gpu:
            env[name] = text
    # A GPU container gets its devices named (the device plugin sets NVIDIA_VISIBLE_DEVICES).
    cause = legacy_cause({name: as_set(value) for name, (_, value) in last.items()}) if last and not gpu else None
    if cause is not None:
        i, value = last[cause]
        found.append(DeviceEnv(f"{path}.env[{i}]", cause, value, legacy=True))
    return env


EnvFromFound = list[tuple[str, str]]  # (path, prefix) of envFrom sources that could spell a DEVICE_ENV name


def _env_from(fields: Mapping[str, object], path: str, found: EnvFromFound) -> None:
    for i, item in enumerate(json_list(fields.get("envFrom"), f"{path}.envFrom")):
        prefix = mapping(item, f"{path}.envFrom[{i}]").get("prefix") or ""
        if not isinstance(prefix, str):
            raise InputError(f"{path}.envFrom[{i}].prefix", "must be a string")
        if prefix in DEVICE_ENV_PREFIXES:  # its keys could spell NVIDIA_VISIBLE_DEVICES
            found.append((f"{path}.envFrom[{i}]", prefix))


def _gpu_amounts(
    requests: Mapping[str, Decimal], limits: Mapping[str, Decimal], others: dict[str, int] | None
) -> dict[str, Decimal]:
    """Every GPU resource held some of; limits win, as for `ContainerView.amount`. `others`: where
    nvidia.com/ names the catalog does not read as GPUs go (a class may serve one, or a device
    plugin renamed NVIDIA's GPUs to it), with the other extended resources."""
    amounts: dict[str, Decimal] = {}
    for name in (*limits, *requests):
        amount = limits.get(name, requests.get(name))
        if not amount or name in amounts:
            continue
        kind = resource_kind(name)
        if kind in _GPU_KINDS:
            amounts[name] = amount
        elif kind is ResourceKind.OTHER and others is not None:
            most = max(limits.get(name, Decimal(0)), requests.get(name, Decimal(0)))
            others[name] = max(others.get(name, 0), int(most))
    return amounts


def _mounts_shm(fields: Mapping[str, object], path: str) -> bool:
    mounts = json_list(fields.get("volumeMounts"), f"{path}.volumeMounts")
    return any(
        (m if type(m) is dict else mapping(m, f"{path}.volumeMounts[{i}]")).get("mountPath")
        in (SHM_PATH, SHM_PATH + "/")
        for i, m in enumerate(mounts)
    )


def read_containers(
    spec: Mapping[str, object],
    key: str,
    env: list[DeviceEnv],
    env_from: EnvFromFound,
    others: dict[str, int] | None = None,
) -> tuple[ContainerView, ...]:
    """The containers under `key`; `others`: the other extended resources they ask for, summed
    over the containers (each at the most of its request and limit)."""
    items = json_list(spec.get(key), f"spec.{key}")
    init = key != "containers"
    return tuple(_container(c, _item_path(key, i), i, init, env, env_from, others) for i, c in enumerate(items))


@lru_cache(maxsize=512)
def _item_path(key: str, index: int) -> str:
    return f"spec.{key}[{index}]"


def _container(
    raw: object,
    path: str,
    index: int,
    init: bool,
    env: list[DeviceEnv],
    env_from: EnvFromFound,
    others: dict[str, int] | None = None,
) -> ContainerView:
    fields = mapping(raw, path)
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{path}.name", "every container needs a name")
    resources = fields.get("resources")
    if type(resources) is not dict:
        resources = mapping(resources, f"{path}.resources")
    mine: dict[str, int] | None = {} if others is not None else None
    requests = _quantities(resources.get("requests"), path, "requests", mine)
    limits = _quantities(resources.get("limits"), path, "limits", mine)
    # env and mounts only matter where runtime settings go: containers that hold GPUs.
    gpu = bool(requests or limits)
    gpus = _gpu_amounts(requests, limits, mine) if gpu else {}
    if mine and others is not None:
        for resource, amount in mine.items():
            others[resource] = others.get(resource, 0) + amount
    if "envFrom" in fields:
        _env_from(fields, path, env_from)
    return ContainerView(
        position=index,
        name=name,
        init=init,
        requests=requests,
        limits=limits,
        env=_env(fields, path, gpu, env) if "env" in fields else {},
        mounts_shm=_mounts_shm(fields, path) if gpu else False,
        restart_always=fields.get("restartPolicy") == "Always",
        gpus=gpus,
    )
