"""How a container reaches NVIDIA GPU devices besides asking the device plugin: NVIDIA's
container runtime conventions, which a pod can name itself. Pure names and predicates, at the
bottom of the engine (the loader lints policies with them, the pod boundary reads pods with them).
"""

from __future__ import annotations

import posixpath

# What the NVIDIA container runtime reads to hand a container devices (the device plugin sets it itself).
DEVICE_ENV = frozenset({"NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES"})
# envFrom prefixes under which a ConfigMap's or Secret's keys could spell one of them.
DEVICE_ENV_PREFIXES = frozenset(name[:i] for name in DEVICE_ENV for i in range(len(name) + 1))
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"  # containerd and CRI-O inject CDI devices named in these
CDI_VENDOR = "nvidia.com/"
NVIDIA_RUNTIME_PREFIX = "nvidia"  # RuntimeClasses nvidia, nvidia-cdi, nvidia-legacy (GPU Operator)


def grants_devices(value: str | None) -> bool:
    """Whether a DEVICE_ENV value hands out devices: anything but empty, `void` and `none` (the
    runtime's values for no device); a value from valueFrom (None) cannot be known, so it may."""
    return value is None or value.strip().lower() not in ("", "void", "none")


def host_path_reaches_gpus(path: str) -> bool:
    """Whether a hostPath gives the node's GPU devices: /, /dev, /dev/nvidia*, /dev/char (whose
    links name every device), /dev/dri, /dev/dxg, or the driver's root /run/nvidia."""
    normal = posixpath.normpath("/" + path.lstrip("/"))
    return normal in ("/", "/dev") or normal.startswith(
        ("/dev/nvidia", "/dev/char", "/dev/dri", "/dev/dxg", "/run/nvidia")
    )


def cdi_names_gpus(annotation: str, value: str) -> bool:
    return annotation.startswith(CDI_ANNOTATION_PREFIX) and CDI_VENDOR in value
