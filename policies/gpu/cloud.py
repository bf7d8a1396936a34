"""The labels cloud providers put on their GPU nodes, and which GPU each value names: pure data
read from the providers' public documentation, and lookups over it.

Nodes of a managed cluster often carry no GPU Feature Discovery label at all (GKE runs its own
device plugin), so a pod is pinned to a GPU by the provider's label, and that pin says what the
pod can get there:

- GKE: `cloud.google.com/gke-accelerator` (the accelerator type of the node pool, as `gcloud
  container node-pools create --accelerator type=` names it) and
  `cloud.google.com/gke-gpu-partition-size` (the MIG profile every GPU of the pool is split
  into; GKE's device plugin then offers each partition as one `nvidia.com/gpu`);
- EKS: `karpenter.k8s.aws/instance-gpu-name` (Karpenter) and `eks.amazonaws.com/instance-gpu-name`
  (EKS Auto Mode), the GPU in lower case (`a100` is an A100 of 40 or 80 GB: p4d or p4de);
- AKS: `karpenter.azure.com/sku-gpu-name` (node auto-provisioning); the plain
  `kubernetes.azure.com/accelerator: nvidia` names no model;
- CoreWeave: `gpu.nvidia.com/class` (`A100_NVLINK_80GB`, `H100_NVLINK_80GB`, `L40S`) and
  `gpu.nvidia.com/model`.

A value names catalog models (MIG-capable GPUs), no model (a GPU without MIG: an L4, T4, A10G,
L40S...), or is unknown here (None): an unknown value pins nothing, so nothing is concluded from it.
"""

from __future__ import annotations

GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
GKE_PARTITION = "cloud.google.com/gke-gpu-partition-size"
KARPENTER_AWS_GPU = "karpenter.k8s.aws/instance-gpu-name"
EKS_AUTO_GPU = "eks.amazonaws.com/instance-gpu-name"
KARPENTER_AZURE_GPU = "karpenter.azure.com/sku-gpu-name"
COREWEAVE_CLASS = "gpu.nvidia.com/class"
COREWEAVE_MODEL = "gpu.nvidia.com/model"

_NO_MIG: tuple[str, ...] = ()

_GKE: dict[str, tuple[str, ...]] = {
    "nvidia-tesla-a100": ("A100-40GB",),
    "nvidia-a100-80gb": ("A100-80GB",),
    "nvidia-h100-80gb": ("H100-80GB",),
    "nvidia-h100-mega-80gb": ("H100-80GB",),
    "nvidia-h200-141gb": ("H200-141GB",),
    "nvidia-b200": ("B200-180GB",),
    "nvidia-gb200": ("GB200-186GB",),
    "nvidia-rtx-pro-6000": ("RTX-PRO-6000-96GB",),
    "nvidia-tesla-k80": _NO_MIG,
    **dict.fromkeys(
        ("nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4"),
        _NO_MIG,
    ),
}
_AWS: dict[str, tuple[str, ...]] = {
    "a100": ("A100-40GB", "A100-80GB"),
    "h100": ("H100-80GB",),
    "h200": ("H200-141GB",),
    "b200": ("B200-180GB",),
    "gb200": ("GB200-186GB",),
    "b300": ("B300-288GB",),
    "rtx-pro-6000": ("RTX-PRO-6000-96GB",),
    **dict.fromkeys(("t4", "t4g", "a10g", "l4", "l40s", "v100", "k80", "m60"), _NO_MIG),
}
_AZURE: dict[str, tuple[str, ...]] = {
    "A100": ("A100-40GB", "A100-80GB"),
    "H100": ("H100-80GB", "H100-94GB"),  # ND H100 v5 (SXM), NC H100 v5 (NVL)
    "H200": ("H200-141GB",),
    "GB200": ("GB200-186GB",),
    **dict.fromkeys(("T4", "A10", "V100", "M60", "K80", "P100", "P40"), _NO_MIG),
}
_COREWEAVE: dict[str, tuple[str, ...]] = {
    "A100_NVLINK": ("A100-40GB",),
    "A100_PCIE_40GB": ("A100-40GB",),
    "A100_NVLINK_80GB": ("A100-80GB",),
    "A100_PCIE_80GB": ("A100-80GB",),
    "H100_NVLINK_80GB": ("H100-80GB",),
    "H100_PCIE": ("H100-80GB",),
    "H100": ("H100-80GB",),
    "H100_NVL": ("H100-94GB",),
    "H200": ("H200-141GB",),
    "GH200": ("GH200-96GB",),
    "GH200_480GB": ("GH200-96GB",),
    "B200": ("B200-180GB",),
    "GB200": ("GB200-186GB",),
    "GB300": ("GB300-278GB",),
    "RTX_PRO_6000": ("RTX-PRO-6000-96GB",),
    **dict.fromkeys(
        (
            "A40",
            "L40",
            "L40S",
            "RTX_A6000",
            "RTX_A5000",
            "RTX_A4000",
            "Quadro_RTX_5000",
            "Quadro_RTX_4000",
            "Tesla_V100_NVLINK",
        ),
        _NO_MIG,
    ),
}

ACCELERATOR_LABELS: dict[str, dict[str, tuple[str, ...]]] = {
    GKE_ACCELERATOR: _GKE,
    KARPENTER_AWS_GPU: _AWS,
    EKS_AUTO_GPU: _AWS,
    KARPENTER_AZURE_GPU: _AZURE,
    COREWEAVE_CLASS: _COREWEAVE,
    COREWEAVE_MODEL: _COREWEAVE,
}
CLOUD_LABELS = frozenset({*ACCELERATOR_LABELS, GKE_PARTITION})


def named_by(key: str, value: str) -> tuple[str, ...] | None:
    """The catalog models a provider's label value names; () for a GPU without MIG; None for a
    value (or label) not known here."""
    table = ACCELERATOR_LABELS.get(key)
    return None if table is None else table.get(value)


def naming(key: str, model: str) -> frozenset[str]:
    """The values of a provider's label that may name the catalog model `model`."""
    return frozenset(value for value, models in ACCELERATOR_LABELS.get(key, {}).items() if model in models)


def gke_accelerators() -> dict[str, tuple[str, ...]]:
    """GKE's accelerator types that name MIG-capable models, and the models."""
    return {value: models for value, models in _GKE.items() if models}
