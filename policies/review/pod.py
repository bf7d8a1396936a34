"""The boundary for Pods: a raw Pod (JSON) becomes a frozen PodView the engine decides on.

Only what GPU admission needs is read; malformed fields raise InputError with their path. Every
field is the requester's to write, so nothing here is trusted beyond its shape: quantities
follow Kubernetes' grammar exactly, and what gives a container a device is read wherever it can
be said (resources, env, envFrom, hostPath volumes, CDI annotations, ephemeral containers).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import NamedTuple

import orjson

from policies.errors import InputError
from policies.gpu.devices import (
    NVIDIA_RUNTIME_PREFIX,
    cdi_names_gpus,
    host_path_reaches_gpus,
    mount_lists_devices,
)
from policies.gpu.placement import Placement, parse_placement
from policies.json_fields import json_list, mapping
from policies.review.containers import ContainerView, DeviceEnv, read_containers, string_map

ANNOTATION_PREFIX = "gpu-admission.io/"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# NVIDIA KAI Scheduler's and Run:ai's GPU sharing (their documented pod annotations, no prefix): a
# fraction of a device (on `gpu-fraction-num-devices` devices), or an amount of its memory.
FRACTION_ANNOTATION = "gpu-fraction"
FRACTION_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
SHARED_MEMORY_ANNOTATION = "gpu-memory"
# Run:ai's dynamic fractions: what a pod may grow into beyond its request when memory is free
# (burstable), so what it can get. A memory limit, like a memory request, is a whole device's.
FRACTION_LIMIT_ANNOTATION = "gpu-fraction-limit"
MEMORY_LIMIT_ANNOTATION = "gpu-memory-limit"


class ClaimRef(NamedTuple):
    """A pod's DRA claim (spec.resourceClaims[i]): a ResourceClaim by name, or the template one
    is made from. What it can allocate is the cluster's to say (policies.gpu.claims)."""

    path: str
    template: bool
    name: str
    # The claim Kubernetes made from the template for this pod (status.resourceClaimStatuses,
    # written only through the status subresource): what the pod holds, whatever becomes of the
    # template after.
    made: str = ""
    entry: str = ""  # the pod's own name for the claim (spec.resourceClaims[i].name)


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
    placement: Placement = Placement()
    node_name: str | None = None
    uid: str = ""
    device_env: tuple[DeviceEnv, ...] = ()  # every container's, ephemeral ones included
    # (path, prefix) of envFrom sources whose keys could spell a DEVICE_ENV variable: with no
    # prefix, a key named so (which the ConfigMap and Secret check keeps out of the namespace);
    # with a prefix of one ("NVIDIA_"), a key no ConfigMap check can tell from an ordinary one.
    env_from: tuple[tuple[str, str], ...] = ()
    host_devices: tuple[tuple[str, str], ...] = ()  # (field path, hostPath) reaching GPU devices
    cdi_devices: tuple[tuple[str, str], ...] = ()  # (annotation, value) naming NVIDIA CDI devices
    gpu_share: Fraction = Fraction(0)  # GPU-equivalents asked of KAI or Run:ai by annotation
    claims: tuple[ClaimRef, ...] = ()  # DRA claims: every one is allocated, referenced or not
    # Extended resources the catalog does not read as GPUs, nvidia.com/ ones included (summed over
    # all containers): a DRA DeviceClass may serve any of them (KEP-5004), which only the
    # cluster's classes tell.
    extended: tuple[tuple[str, int], ...] = ()
    # The PodGroup the pod belongs to (spec.schedulingGroup.podGroupName, Kubernetes 1.36 on): a
    # template claim the group makes too is one claim for all its pods (KEP-5729).
    group: str = ""

    @property
    def mirror(self) -> bool:
        return MIRROR_ANNOTATION in self.annotations

    def annotation(self, name: str) -> str | None:
        return self.annotations.get(ANNOTATION_PREFIX + name)

    @property
    def reaches_gpu(self) -> bool:
        """Could touch a GPU: asks for one, runs under the NVIDIA runtime, or names devices itself."""
        return (
            self.holds_gpu
            or (self.runtime_class_name or "").startswith(NVIDIA_RUNTIME_PREFIX)
            or bool(self.device_env or self.host_devices or self.cdi_devices or self.gpu_share)
            or any(prefix for _, prefix in self.env_from)
        )

    @property
    def in_scope(self) -> bool:
        """What gpu-admission acts on: pods that could reach a GPU (a DRA claim may: which devices
        it holds is looked up), and pods asking for Triton."""
        return self.reaches_gpu or bool(self.claims or self.extended) or self.annotation("triton") == "inject"

    @property
    def all_containers(self) -> tuple[ContainerView, ...]:
        return self.init_containers + self.containers

    @property
    def holds_gpu(self) -> bool:
        return any(c.holds_gpu for c in self.all_containers)


def _volumes(raw: list[object]) -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
    names: set[str] = set()
    devices: list[tuple[str, str]] = []
    for i, item in enumerate(raw):
        volume = mapping(item, f"spec.volumes[{i}]")
        names.add(str(volume.get("name")))
        host = volume.get("hostPath")
        if host is not None:
            path = mapping(host, f"spec.volumes[{i}].hostPath").get("path")
            if not isinstance(path, str):
                raise InputError(f"spec.volumes[{i}].hostPath.path", "must be a string")
            if host_path_reaches_gpus(path):
                devices.append((f"spec.volumes[{i}].hostPath.path", path))
    return frozenset(names), tuple(devices)


def _device_list_mounts(spec: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """(field path, mountPath) of every container's mount the NVIDIA runtime reads as a device list."""
    found: list[tuple[str, str]] = []
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for i, item in enumerate(json_list(spec.get(kind), f"spec.{kind}")):
            if type(item) is not dict or "volumeMounts" not in item:
                continue
            for j, mount in enumerate(json_list(item.get("volumeMounts"), f"spec.{kind}[{i}].volumeMounts")):
                where = mount.get("mountPath") if type(mount) is dict else None
                if isinstance(where, str) and mount_lists_devices(where):
                    found.append((f"spec.{kind}[{i}].volumeMounts[{j}].mountPath", where))
    return tuple(found)


def _gpu_share(annotations: Mapping[str, str]) -> Fraction:
    """The GPU-equivalents a KAI or Run:ai pod can get by annotation: the fraction (or the dynamic
    fraction's limit, where higher), exact, times its devices; a memory amount or memory limit
    (whose share depends on the GPU it lands on) a whole device each."""
    fraction, memory = annotations.get(FRACTION_ANNOTATION), annotations.get(SHARED_MEMORY_ANNOTATION)
    if fraction is None and memory is None:
        return Fraction(0)
    devices_text = annotations.get(FRACTION_DEVICES_ANNOTATION, "1")
    if not devices_text.isdigit() or int(devices_text) < 1:
        raise InputError(f"metadata.annotations.{FRACTION_DEVICES_ANNOTATION}", "must be a whole number, 1 or more")
    devices = int(devices_text)
    if fraction is None or MEMORY_LIMIT_ANNOTATION in annotations:
        return Fraction(devices)
    share = _fraction(fraction, FRACTION_ANNOTATION)
    limit = annotations.get(FRACTION_LIMIT_ANNOTATION)
    if limit is not None:  # the most it may burst to: what it can get
        share = max(share, _fraction(limit, FRACTION_LIMIT_ANNOTATION))
    return share * devices


def _fraction(text: str, annotation: str) -> Fraction:
    share = Fraction(-1)
    if len(text) <= 32 and "e" not in text.lower():  # never build a number from an exponent
        with contextlib.suppress(ValueError, ZeroDivisionError):
            share = Fraction(text.strip())
    if not 0 < share <= 1:
        raise InputError(f"metadata.annotations.{annotation}", f"{text[:40]!r} is not a fraction of a GPU in (0, 1]")
    return share


def _made_claims(status: Mapping[str, object]) -> dict[str, str]:
    """status.resourceClaimStatuses: the pod's claim name -> the claim made for it."""
    return claims_made(json_list(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses"))


def claims_made(statuses: Iterable[object]) -> dict[str, str]:
    """The entries of a `resourceClaimStatuses` list (a Pod's, or a PodGroup's, of the same shape):
    claim name -> the ResourceClaim made for it, where one was."""
    made: dict[str, str] = {}
    for item in statuses:
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            claim = item.get("resourceClaimName")
            if isinstance(claim, str) and claim:
                made[str(item["name"])] = claim
    return made


def _claims(spec: Mapping[str, object], status: Mapping[str, object]) -> tuple[ClaimRef, ...]:
    made = _made_claims(status) if "resourceClaimStatuses" in status else {}
    found = []
    for i, item in enumerate(json_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        path = f"spec.resourceClaims[{i}]"
        claim = mapping(item, path)
        for key, template in (("resourceClaimName", False), ("resourceClaimTemplateName", True)):
            name = claim.get(key)
            if name is not None:
                if not isinstance(name, str) or not name:
                    raise InputError(f"{path}.{key}", "must be a name")
                own = claim.get("name")
                entry = own if isinstance(own, str) else ""
                found.append(ClaimRef(path, template, name, made.get(entry, "") if template else "", entry))
    return tuple(found)


def _scheduling_group(spec: Mapping[str, object]) -> str:
    group = spec.get("schedulingGroup")
    if group is None:
        return ""
    name = mapping(group, "spec.schedulingGroup").get("podGroupName")
    if name is None:
        return ""
    if not isinstance(name, str):
        raise InputError("spec.schedulingGroup.podGroupName", "must be a name")
    return name


# What parse_pod reads of a pod's status (pod_fingerprint leaves the rest out: keep them one).
STATUS_READ = ("phase", "resourceClaimStatuses")
# Metadata every write changes and nothing here reads.
_METADATA_UNREAD = frozenset({"resourceVersion", "managedFields"})


def pod_fingerprint(raw: Mapping[str, object]) -> bytes | None:
    """Bytes equal for two versions of a pod that parse_pod reads alike but for spec.nodeName: all
    of its metadata and spec but those, of its status only what parse_pod reads. A pod's status
    changes with each of the kubelet's reports and its binding only names its node, so a pod
    watch that has read one version need not read the next (webhook.cluster.quota.counting).
    None where the pod cannot be written back as JSON (read it whole, each time)."""
    metadata, spec, status = raw.get("metadata"), raw.get("spec"), raw.get("status")
    if type(metadata) is dict:
        metadata = {key: value for key, value in metadata.items() if key not in _METADATA_UNREAD}
    if type(spec) is dict and "nodeName" in spec:
        spec = {key: value for key, value in spec.items() if key != "nodeName"}
    if type(status) is dict:
        status = [status.get(key) for key in STATUS_READ]
    try:
        return orjson.dumps([metadata, spec, status])
    except orjson.JSONEncodeError:
        return None


def parse_pod(raw: object) -> PodView:
    """A PodView of a Pod's JSON, or of a pod template (metadata + spec). Of its status, only
    STATUS_READ."""
    pod = mapping(raw, "")
    metadata = mapping(pod.get("metadata"), "metadata")
    spec = mapping(pod.get("spec"), "spec")
    status = mapping(pod.get("status"), "status")
    runtime_class = spec.get("runtimeClassName")
    node_name = spec.get("nodeName")
    node_selector = string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    annotations = string_map(metadata.get("annotations"), "metadata.annotations")
    env: list[DeviceEnv] = []
    env_from: list[tuple[str, str]] = []
    extended: dict[str, int] = {}
    containers = read_containers(spec, "containers", env, env_from, extended)
    init_containers = read_containers(spec, "initContainers", env, env_from, extended)
    if spec.get("ephemeralContainers"):  # read for their device access only
        read_containers(spec, "ephemeralContainers", env, env_from)
    volume_names, host_devices = _volumes(json_list(spec.get("volumes"), "spec.volumes"))
    host_devices += _device_list_mounts(spec)
    for i, toleration in enumerate(json_list(spec.get("tolerations"), "spec.tolerations")):  # written into
        if type(toleration) is not dict:
            mapping(toleration, f"spec.tolerations[{i}]")
    return PodView(
        name=str(metadata.get("name") or metadata.get("generateName") or ""),
        namespace=str(metadata.get("namespace") or ""),
        labels=string_map(metadata.get("labels"), "metadata.labels"),
        annotations=annotations,
        containers=containers,
        init_containers=init_containers,
        node_selector=node_selector,
        runtime_class_name=runtime_class if isinstance(runtime_class, str) else None,
        volume_names=volume_names,
        phase=status.get("phase") if isinstance(status.get("phase"), str) else None,  # type: ignore[arg-type]
        deleting=metadata.get("deletionTimestamp") is not None,
        placement=parse_placement(spec, node_selector),
        node_name=node_name if isinstance(node_name, str) and node_name else None,
        uid=str(metadata.get("uid") or ""),
        device_env=tuple(env),
        env_from=tuple(env_from),
        host_devices=host_devices,
        cdi_devices=tuple((k, v) for k, v in annotations.items() if cdi_names_gpus(k, v)),
        gpu_share=_gpu_share(annotations),
        claims=_claims(spec, status) if "resourceClaims" in spec else (),
        extended=tuple(sorted(extended.items())),
        group=_scheduling_group(spec) if "schedulingGroup" in spec else "",
    )
