"""NVIDIA's MIG-capable GPU models: their profiles, and how the device plugin and GPU Feature
Discovery name them (resource names, node labels). Pure data and naming rules.

Data follows shared/reference/mig-profiles.md. Weights are exact fractions (g / slices):
seven 1g slices of a 7-slice GPU are exactly one GPU-equivalent.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
WHOLE_GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE_SUFFIX = ".shared"
PRODUCT_LABEL = "nvidia.com/gpu.product"
STRATEGY_LABEL = "nvidia.com/mig.strategy"
NVIDIA_PREFIX = "NVIDIA-"
SHARED_SUFFIX = "-SHARED"
INVALID_SUFFIX = "-MIG-INVALID"
# HAMi's resources (its defaults): shares of a GPU it accounts itself; a pod asking for them is
# not MIG's to rewrite, and its nvidia.com/gpu is a share, not a device.
HAMI_RESOURCES = frozenset(
    {"nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores", "nvidia.com/priority"}
)


def label_name(profile_name: str) -> str:
    """A profile as GFD writes it in resource names and labels: '+' becomes '.'."""
    return profile_name.replace("+", ".")


def mixed_resource(profile_name: str) -> str:
    """The extended resource of a profile under migStrategy=mixed ('+' becomes '.')."""
    return MIG_RESOURCE_PREFIX + label_name(profile_name)


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    g: int
    memory_gb: int
    max_count: int

    @property
    def resource(self) -> str:
        return mixed_resource(self.name)

    @property
    def is_variant(self) -> bool:
        """+me, +gfx, -me profiles: chosen only when asked for by name."""
        return "+" in self.name or "-" in self.name


# One object per model, compared and hashed by identity: models are dict keys and set members on
# every review, and a field-by-field hash of their profile tables costs microseconds each time.
@dataclass(frozen=True, slots=True, eq=False)
class GpuModel:
    key: str
    memory_gb: int
    slices: int
    product_labels: tuple[str, ...]
    profiles: tuple[Profile, ...]

    def profile(self, name: str) -> Profile | None:
        for profile in self.profiles:
            if profile.name == name:
                return profile
        return None

    def weight(self, profile: Profile) -> Fraction:
        return Fraction(profile.g, self.slices)

    def base_labels(self, legacy: bool = False) -> tuple[str, ...]:
        """The product names GFD writes for this model: NVML's, and with `legacy` the same without
        `NVIDIA-` (drivers before R470 reported names so: recognised, never steered to)."""
        if not legacy:
            return self.product_labels
        old = tuple(label.removeprefix(NVIDIA_PREFIX) for label in self.product_labels if label[:7] == NVIDIA_PREFIX)
        return self.product_labels + old

    def whole_labels(self, legacy: bool = False) -> tuple[str, ...]:
        """nvidia.com/gpu.product of this model's nodes that are not split under the single
        strategy (no MIG, or the mixed strategy), exclusive or shared (`-SHARED`)."""
        return tuple(f"{label}{suffix}" for suffix in ("", SHARED_SUFFIX) for label in self.base_labels(legacy))

    def single_strategy_labels(self, profile: Profile, legacy: bool = False) -> tuple[str, ...]:
        """nvidia.com/gpu.product of this model's nodes split into `profile` under the single
        strategy, exclusive or shared; GFD writes `+` as `.` in labels as in resource names."""
        name = label_name(profile.name)
        labels = self.base_labels(legacy)
        return tuple(f"{label}-MIG-{name}{suffix}" for suffix in ("", SHARED_SUFFIX) for label in labels)


def _standard(one: int, double: int, half: int, whole: int) -> tuple[Profile, ...]:
    """The standard layout of a 7-slice GPU, from the memory of its 1g, 1g-double, 3g/4g and 7g."""
    return (
        Profile(f"1g.{one}gb", 1, one, 7),
        Profile(f"1g.{one}gb+me", 1, one, 1),
        Profile(f"1g.{double}gb", 1, double, 4),
        Profile(f"2g.{double}gb", 2, double, 3),
        Profile(f"3g.{half}gb", 3, half, 2),
        Profile(f"4g.{half}gb", 4, half, 1),
        Profile(f"7g.{whole}gb", 7, whole, 1),
    )


_A30 = (
    Profile("1g.6gb", 1, 6, 4),
    Profile("1g.6gb+me", 1, 6, 1),
    Profile("2g.12gb", 2, 12, 2),
    Profile("2g.12gb+me", 2, 12, 1),
    Profile("4g.24gb", 4, 24, 1),
)
_RTX_PRO_6000 = (
    Profile("1g.24gb", 1, 24, 4),
    Profile("1g.24gb+me", 1, 24, 1),
    Profile("1g.24gb+gfx", 1, 24, 4),
    Profile("1g.24gb+me.all", 1, 24, 1),
    Profile("1g.24gb-me", 1, 24, 4),
    Profile("2g.48gb", 2, 48, 2),
    Profile("2g.48gb+gfx", 2, 48, 2),
    Profile("2g.48gb+me.all", 2, 48, 1),
    Profile("2g.48gb-me", 2, 48, 2),
    Profile("4g.96gb", 4, 96, 1),
    Profile("4g.96gb+gfx", 4, 96, 1),
)

MODELS: tuple[GpuModel, ...] = (
    GpuModel("A30-24GB", 24, 4, ("NVIDIA-A30",), _A30),
    GpuModel("A100-40GB", 40, 7, ("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"), _standard(5, 10, 20, 40)),
    GpuModel("A100-80GB", 80, 7, ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"), _standard(10, 20, 40, 80)),
    GpuModel("H100-80GB", 80, 7, ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"), _standard(10, 20, 40, 80)),
    GpuModel("H100-94GB", 94, 7, ("NVIDIA-H100-NVL",), _standard(12, 24, 47, 94)),
    GpuModel("H200-141GB", 141, 7, ("NVIDIA-H200", "NVIDIA-H200-NVL"), _standard(18, 35, 71, 141)),
    GpuModel("GH200-96GB", 96, 7, ("NVIDIA-GH200-480GB", "NVIDIA-GH200-120GB"), _standard(12, 24, 48, 96)),
    GpuModel("GH200-144GB", 144, 7, ("NVIDIA-GH200-144G-HBM3e",), _standard(18, 36, 72, 144)),
    GpuModel("B200-180GB", 180, 7, ("NVIDIA-B200",), _standard(23, 45, 90, 180)),
    GpuModel("GB200-186GB", 186, 7, ("NVIDIA-GB200",), _standard(23, 47, 93, 186)),
    GpuModel("B300-288GB", 269, 7, ("NVIDIA-B300-SXM6-AC",), _standard(34, 67, 135, 269)),
    GpuModel(
        "RTX-PRO-6000-96GB",
        96,
        4,
        (
            "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
            "NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition",
            "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition",
        ),
        _RTX_PRO_6000,
    ),
)

ALIASES: dict[str, str] = {"H100-96GB": "GH200-96GB"}
