"""How a container reaches NVIDIA GPU devices besides asking the device plugin: NVIDIA's
container runtime conventions, which a pod can name itself. Pure names and predicates, at the
bottom of the engine (the loader lints policies with them, the pod boundary reads pods with them).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

# What the NVIDIA container runtime reads to hand a container devices (the device plugin sets it itself).
VISIBLE_ENV = "NVIDIA_VISIBLE_DEVICES"
DEVICE_ENV = frozenset({VISIBLE_ENV, "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES"})
# The NVIDIA container toolkit treats an image as a legacy CUDA image when CUDA_VERSION is
# non-empty and NVIDIA_REQUIRE_CUDA is empty (it compares their lengths, so an empty value is as
# good as none: internal/config/image/cuda_image.go, IsLegacy) and, with NVIDIA_VISIBLE_DEVICES
# not set at all (set, even empty, it is the list), hands the container every GPU.
LEGACY_ENV = "CUDA_VERSION"
REQUIRE_ENV = "NVIDIA_REQUIRE_CUDA"
# Every name the toolkit's device rules read, as a container's env or a ConfigMap's key may set it.
TOOLKIT_ENV = frozenset({*DEVICE_ENV, LEGACY_ENV, REQUIRE_ENV})
# envFrom prefixes under which a ConfigMap's or Secret's keys could spell one of them.
DEVICE_ENV_PREFIXES = frozenset(name[:i] for name in TOOLKIT_ENV for i in range(len(name) + 1))
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"  # containerd and CRI-O inject CDI devices named in these
# The NVIDIA container toolkit's NRI plugin injects the CDI devices named in
# `nvidia.cdi.k8s.io/container.<name>`, `nvidia.cdi.k8s.io/pod` and the bare key: NVIDIA's own
# devices, whatever the value spells.
NRI_CDI_ANNOTATION = "nvidia.cdi.k8s.io"
CDI_VENDOR = "nvidia.com/"
NVIDIA_RUNTIME_PREFIX = "nvidia"  # RuntimeClasses nvidia, nvidia-cdi, nvidia-legacy (GPU Operator)


def grants_devices(value: str | None) -> bool:
    """Whether a DEVICE_ENV value hands out devices: anything but empty, `void` and `none` (the
    runtime's values for no device); a value from valueFrom (None) cannot be known, so it may."""
    return value is None or value.strip().lower() not in ("", "void", "none")


def as_set(value: str | None) -> str | None:
    """The value a variable ends with, as far as admission can know it: None for one from valueFrom
    or one that names another variable (kubelet expands `$(NAME)`, whose value may be anything)."""
    return None if value is None or "$(" in value else value


def legacy_cause(written: Mapping[str, str | None]) -> str | None:
    """Which of the variables `written` (name to the value a container ends with, None where it
    cannot be known; a name not there keeps the image's value, whatever it is) makes the toolkit
    read the container as a legacy CUDA image and hand it every GPU; None where none can. Only
    what is written counts: an image's own CUDA_VERSION is the image's, but written beside an
    NVIDIA_REQUIRE_CUDA that is (or may be) empty, or under one the image may lack, it is ours."""
    if VISIBLE_ENV in written:  # set, even empty: the toolkit's device list is that, never "all"
        return None
    cuda_set, require_set = LEGACY_ENV in written, REQUIRE_ENV in written
    cuda, require = written.get(LEGACY_ENV), written.get(REQUIRE_ENV)
    cuda_may_fill = not cuda_set or cuda is None or cuda != ""
    require_may_be_empty = not require_set or require is None or require == ""
    if not (cuda_may_fill and require_may_be_empty):
        return None
    return REQUIRE_ENV if require_set else LEGACY_ENV if cuda_set else None


# Where the node's GPU devices are: /dev/nvidia*, /dev/char (whose links name every device),
# /dev/dri, /dev/dxg, /dev/vfio (GPUs bound for passthrough), and the driver's root /run/nvidia
# (the GPU Operator's driver container); and what hands them out past the device plugin: the
# CDI specs the runtime injects devices from (/etc/cdi, /var/run/cdi) and the kubelet's
# device-plugin sockets, where a pod can register itself as the GPU plugin.
DEVICE_ROOTS = (
    "/dev/nvidia",
    "/dev/char",
    "/dev/dri",
    "/dev/dxg",
    "/dev/vfio",
    "/run/nvidia",
    "/run/cdi",
    "/etc/cdi",
    "/var/lib/kubelet/device-plugins",
)
# The NVIDIA container toolkit with accept-nvidia-visible-devices-as-volume-mounts (the hardening
# NVIDIA recommends) reads the names of mounts under this directory of a container as its device
# list: any volume mounted there (a hostPath of /dev/null will do) hands out GPUs.
DEVICE_LIST_MOUNT = "/var/run/nvidia-container-devices"


def _host(path: str) -> str:
    """A host path as kubelet resolves it: normalised, and /var/run the /run it links to."""
    normal = posixpath.normpath("/" + path.lstrip("/"))
    if normal == "/var/run" or normal.startswith("/var/run/"):
        normal = "/run" + normal[len("/var/run") :]
    return normal


def host_path_reaches_gpus(path: str) -> bool:
    """Whether a hostPath gives the node's GPU devices: a device root, anything under one, or any
    directory above one (/, /dev, /run and /var/run, which is /run on the host)."""
    normal = _host(path)
    if normal.startswith(DEVICE_ROOTS):
        return True
    return any(root.startswith(normal.rstrip("/") + "/") for root in DEVICE_ROOTS) or normal == "/"


def mount_lists_devices(mount_path: str) -> bool:
    """Whether a container's volume mounted at `mount_path` is read as a device list: the toolkit
    reads the destinations of the container's mounts under the directory (its /run spelling too,
    should an image link the two)."""
    normal = posixpath.normpath("/" + mount_path.lstrip("/"))
    return any(
        normal == root or normal.startswith(root + "/") for root in (DEVICE_LIST_MOUNT, "/run/nvidia-container-devices")
    )


def cdi_names_gpus(annotation: str, value: str) -> bool:
    """Whether an annotation asks the runtime for NVIDIA's CDI devices: a `cdi.k8s.io/` one naming
    them, or any of the NRI plugin's keys with a value."""
    if annotation == NRI_CDI_ANNOTATION or annotation.startswith(NRI_CDI_ANNOTATION + "/"):
        return bool(value.strip())
    return annotation.startswith(CDI_ANNOTATION_PREFIX) and CDI_VENDOR in value


# DRA extended resources (KEP-5004: a container asks `deviceclass.resource.kubernetes.io/<class>`
# and the scheduler makes the claim): NVIDIA's DRA driver names its GPU device classes
# gpu.nvidia.com, mig.nvidia.com and vfio.gpu.nvidia.com (its compute-domain classes hand out
# channels, not GPUs). Each unit is charged a whole GPU: which device, or which MIG profile, the
# claim gets is the scheduler's to pick, after admission.
DRA_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
DRA_GPU_CLASSES = frozenset({"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"})


def is_dra_gpu(resource: str) -> bool:
    return resource.startswith(DRA_EXTENDED_PREFIX) and resource[len(DRA_EXTENDED_PREFIX) :] in DRA_GPU_CLASSES
