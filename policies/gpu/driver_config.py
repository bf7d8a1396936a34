"""A claim's driver configuration (`spec.devices.config[].opaque`), read where it is NVIDIA's own
(kubernetes-sigs/dra-driver-nvidia-gpu, `api/nvidia.com/resource/v1beta1`), opaque otherwise.

NVIDIA's GPU driver (`gpu.nvidia.com`) takes `resource.nvidia.com/v1beta1` objects, decoded
strictly when a claim is prepared (an unknown field fails it), and applies to each request the
last config naming it (`requests`, none: all):
- `GpuConfig` and `MigDeviceConfig` with `sharing.strategy` `TimeSlicing` (GPUs only: a time-slice
  interval) or `MPS` (an MPS daemon for the claim's devices): the containers of the claim share its
  devices; the claim still holds each device outright;
- `VfioDeviceConfig`: the GPU bound to vfio-pci and passed whole to a virtual machine, sharing
  nothing.
A configuration of that API with a field the driver does not take, or of any other driver or
kind, is opaque here: its effect cannot be known (policies.judge.claim_checks keeps it behind
`draOpaqueConfig`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policies.gpu.device_cel import NVIDIA_DRIVER

API_VERSION = "resource.nvidia.com/v1beta1"
TIME_SLICING, MPS, PASSTHROUGH = "TimeSlicing", "MPS", "Passthrough"
NOT_SHARED = ""  # NVIDIA's configuration, sharing nothing
_MPS_FIELDS = frozenset(
    {
        "defaultActiveThreadPercentage",
        "defaultPinnedDeviceMemoryLimit",
        "defaultPerDevicePinnedMemoryLimit",
        "multiUser",
    }
)
_INTERVALS = frozenset({"Default", "Short", "Medium", "Long"})


@dataclass(frozen=True, slots=True)
class DriverConfig:
    """One entry of a claim's `devices.config`: the requests it names (() for all), and how
    NVIDIA's driver shares their devices by it (NOT_SHARED, TIME_SLICING, MPS, PASSTHROUGH);
    `sharing` None: opaque here."""

    path: str  # of its `opaque`
    requests: tuple[str, ...] = ()
    sharing: str | None = None


def _only(raw: object, fields: frozenset[str]) -> bool:
    return isinstance(raw, Mapping) and set(raw) <= fields


def _mps(raw: object) -> bool:
    return raw is None or _only(raw, _MPS_FIELDS)


def _sharing(raw: object, gpu: bool) -> str | None:
    """The strategy of a `sharing` block the driver takes; None for one it would refuse."""
    if raw is None:
        return NOT_SHARED
    allowed = {"strategy", "mpsConfig", "timeSlicingConfig"} if gpu else {"strategy", "mpsConfig"}
    if not _only(raw, frozenset(allowed)) or not isinstance(raw, Mapping):
        return None
    strategy = raw.get("strategy")
    slicing = raw.get("timeSlicingConfig")
    if strategy == TIME_SLICING and gpu and "mpsConfig" not in raw:
        interval = slicing.get("interval") if isinstance(slicing, Mapping) else None
        fine = slicing is None or (
            _only(slicing, frozenset({"interval"})) and (interval is None or interval in _INTERVALS)
        )
        return TIME_SLICING if fine else None
    if strategy == MPS and "timeSlicingConfig" not in raw and _mps(raw.get("mpsConfig")):
        return MPS
    return None


def _read_parameters(parameters: Mapping[str, object]) -> str | None:
    if parameters.get("apiVersion") != API_VERSION:
        return None
    kind = parameters.get("kind")
    rest = {k: v for k, v in parameters.items() if k not in ("apiVersion", "kind")}
    if kind in ("GpuConfig", "MigDeviceConfig") and set(rest) <= {"sharing"}:
        return _sharing(rest.get("sharing"), kind == "GpuConfig")
    if kind == "VfioDeviceConfig" and set(rest) <= {"iommu"}:
        iommu = rest.get("iommu")
        return PASSTHROUGH if iommu is None or _only(iommu, frozenset({"backendPolicy", "enableAPIDevice"})) else None
    return None


def read_config(raw: object, path: str) -> DriverConfig | None:
    """One `devices.config` entry; None where it holds no opaque configuration."""
    if not isinstance(raw, Mapping) or raw.get("opaque") is None:
        return None
    names = raw.get("requests")
    requests = tuple(str(n) for n in names) if isinstance(names, list) else ()
    opaque = raw["opaque"]
    where = f"{path}.opaque"
    if not isinstance(opaque, Mapping) or opaque.get("driver") != NVIDIA_DRIVER:
        return DriverConfig(where, requests)
    parameters = opaque.get("parameters")
    sharing = _read_parameters(parameters) if isinstance(parameters, Mapping) else None
    return DriverConfig(where, requests, sharing)
