"""NVIDIA's MIG-capable GPU models: their profiles, and how the device plugin and GPU Feature
Discovery name them (resource names, node labels). Pure data and naming rules.

Data follows shared/reference/mig-profiles.md (and .json). Weights are exact fractions
(g / slices): seven 1g slices of a 7-slice GPU are exactly one GPU-equivalent.

Memory: NVIDIA names a profile by rounding its memory *up*, so a profile holds less than its
name read as GiB (an H100 `1g.10gb` has 9984 MiB). Each profile carries the memory NVIDIA's own
output shows for it where the reference has a figure (GFD's `nvidia.com/mig-<p>.memory` labels,
`nvidia-smi mig -lgip`, NVML's instance memory); profiles of one model with the same memory in
their names share the figure (they hold the same memory slices). Where none is known, the
estimate is the name's GiB times the lowest real-to-named ratio observed on that model (bigger
profiles lose less to the rounding, so this never overstates them), and on a model with no
figure at all 22/25, below every ratio observed anywhere (the lowest is H200 `1g.18gb`: 16 of 18
GiB). A need is never sized onto a profile that cannot hold it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
WHOLE_GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE_SUFFIX = ".shared"
PRODUCT_LABEL = "nvidia.com/gpu.product"
STRATEGY_LABEL = "nvidia.com/mig.strategy"
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"  # GFD: none, time-slicing or mps
CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"  # mig-manager: "success" once a node is split as asked
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB: of the device nvidia.com/gpu names on the node
ESTIMATED_SHARE = Fraction(22, 25)  # of a profile's named memory, where no real figure is known
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


def memory_label(profile_name: str) -> str:
    """GFD's label with a profile's real memory in MiB (mixed strategy)."""
    return f"{MIG_RESOURCE_PREFIX}{label_name(profile_name)}.memory"


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    g: int
    memory_gb: int  # as the name says: rounded up
    max_count: int
    observed_mib: int | None = None  # real memory from NVIDIA's own output, where known
    legacy: bool = False  # a name only early drivers reported: recognised, never chosen unasked
    estimate_share: Fraction = ESTIMATED_SHARE  # of the named memory, where nothing was observed
    # Not `_real`: mypyc names the C field `__real`, which C compilers reserve.
    _real_mib: tuple[int, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Read for every option a memory need is sized against: worked out once, not per review.
        estimate = (self.observed_mib, "observed") if self.observed_mib is not None else None
        real = estimate or (math.floor(self.memory_gb * 1024 * self.estimate_share), "estimated")
        object.__setattr__(self, "_real_mib", real)

    @property
    def resource(self) -> str:
        return mixed_resource(self.name)

    @property
    def is_variant(self) -> bool:
        """+me, +gfx, -me profiles: chosen only when asked for by name."""
        return "+" in self.name or "-" in self.name

    @property
    def chosen_unasked(self) -> bool:
        """Whether memory sizing may pick it (a plain profile of a current driver)."""
        return not (self.is_variant or self.legacy)

    def real_memory_mib(self) -> tuple[int, str]:
        """(MiB, where the figure comes from): NVIDIA's observed figure, else the estimate."""
        return self._real_mib


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
        `NVIDIA-` (drivers before R470 reported names so: recognised, and steered to under the single
        strategy)."""
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


def _standard(
    one: int, double: int, half: int, whole: int, observed: dict[int, int] | None = None, share: Fraction | None = None
) -> tuple[Profile, ...]:
    """The standard layout of a 7-slice GPU, from the memory of its 1g, 1g-double, 3g/4g and 7g;
    `observed`: real MiB by the GB in the name."""
    seen = observed or {}
    share = share or _lowest_share(seen)
    return (
        Profile(f"1g.{one}gb", 1, one, 7, seen.get(one), estimate_share=share),
        Profile(f"1g.{one}gb+me", 1, one, 1, seen.get(one), estimate_share=share),
        Profile(f"1g.{double}gb", 1, double, 4, seen.get(double), estimate_share=share),
        Profile(f"2g.{double}gb", 2, double, 3, seen.get(double), estimate_share=share),
        Profile(f"3g.{half}gb", 3, half, 2, seen.get(half), estimate_share=share),
        Profile(f"4g.{half}gb", 4, half, 1, seen.get(half), estimate_share=share),
        Profile(f"7g.{whole}gb", 7, whole, 1, seen.get(whole), estimate_share=share),
    )


def _lowest_share(observed: dict[int, int]) -> Fraction:
    """The lowest real-to-named memory ratio observed on a model (the catalog-wide bound if none)."""
    return min((Fraction(mib, gb * 1024) for gb, mib in observed.items()), default=ESTIMATED_SHARE)


def _gib(value: float) -> int:
    """MiB of a GiB figure nvidia-smi printed with two decimals, rounded down (it may be more)."""
    return math.floor(value * 1024)


_A30 = (
    Profile("1g.6gb", 1, 6, 4),
    Profile("1g.6gb+me", 1, 6, 1),
    Profile("2g.12gb", 2, 12, 2),
    Profile("2g.12gb+me", 2, 12, 1),
    Profile("4g.24gb", 4, 24, 1),
)
_RTX_MIB = _gib(23.62)
_RTX = _lowest_share({24: _RTX_MIB})
_RTX_PRO_6000 = (
    Profile("1g.24gb", 1, 24, 4, _RTX_MIB),
    Profile("1g.24gb+me", 1, 24, 1, _RTX_MIB),
    Profile("1g.24gb+gfx", 1, 24, 4, _RTX_MIB),
    Profile("1g.24gb+me.all", 1, 24, 1, _RTX_MIB),
    Profile("1g.24gb-me", 1, 24, 4, _RTX_MIB),
    Profile("2g.48gb", 2, 48, 2, estimate_share=_RTX),
    Profile("2g.48gb+gfx", 2, 48, 2, estimate_share=_RTX),
    Profile("2g.48gb+me.all", 2, 48, 1, estimate_share=_RTX),
    Profile("2g.48gb-me", 2, 48, 2, estimate_share=_RTX),
    Profile("4g.96gb", 4, 96, 1, estimate_share=_RTX),
    Profile("4g.96gb+gfx", 4, 96, 1, estimate_share=_RTX),
)
_GB200_MIB = {23: _gib(22.0), 47: _gib(45.5)}
_GB200 = _lowest_share({**_GB200_MIB, 24: _GB200_MIB[23]})  # the early 1g.24gb is the same slice
# Early GB200 drivers named these; the GPU Operator's default layouts still list them, so nodes
# may carry them (mig-profiles.md): recognised, never chosen unasked.
_GB200_EARLY = (
    Profile("1g.24gb", 1, 24, 7, _GB200_MIB[23], legacy=True),
    Profile("1g.24gb+me", 1, 24, 1, _GB200_MIB[23], legacy=True),
    Profile("3g.95gb", 3, 95, 2, legacy=True, estimate_share=_GB200),
    Profile("4g.95gb", 4, 95, 1, legacy=True, estimate_share=_GB200),
    Profile("7g.189gb", 7, 189, 1, legacy=True, estimate_share=_GB200),
)
_A100_40_MIB = {5: 4864, 10: 9856, 20: 19968, 40: 40192}  # NVML instance memory (DGX A100)
_A100_80_MIB = {10: 9856, 20: 19968, 40: 40192, 80: 80384}
_H100_80_MIB = {10: 9984, 20: 20096, 40: 40320}  # GFD labels of a real H100 80GB node
_H100_94_MIB = {12: _gib(10.75), 24: _gib(21.62), 47: _gib(46.38)}
_H200_MIB = {18: _gib(16.0), 35: _gib(32.25), 71: _gib(69.5)}
_GH200_144_MIB = {18: _gib(17.5), 36: _gib(35.25)}
_B200_MIB = {23: _gib(22.0), 45: _gib(44.25)}

MODELS: tuple[GpuModel, ...] = (
    GpuModel("A30-24GB", 24, 4, ("NVIDIA-A30",), _A30),
    GpuModel(
        "A100-40GB",
        40,
        7,
        ("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB", "NVIDIA-A800-40GB-Active"),
        _standard(5, 10, 20, 40, _A100_40_MIB),
    ),
    GpuModel(
        "A100-80GB",
        80,
        7,
        ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe", "NVIDIA-A800-SXM4-80GB", "NVIDIA-A800-80GB-PCIe"),
        _standard(10, 20, 40, 80, _A100_80_MIB),
    ),
    GpuModel(
        "H100-80GB",
        80,
        7,
        ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe", "NVIDIA-H800", "NVIDIA-H800-PCIe"),
        _standard(10, 20, 40, 80, _H100_80_MIB),
    ),
    GpuModel("H100-94GB", 94, 7, ("NVIDIA-H100-NVL", "NVIDIA-H800-NVL"), _standard(12, 24, 47, 94, _H100_94_MIB)),
    GpuModel("H200-141GB", 141, 7, ("NVIDIA-H200", "NVIDIA-H200-NVL"), _standard(18, 35, 71, 141, _H200_MIB)),
    GpuModel(
        "GH200-96GB", 96, 7, ("NVIDIA-GH200-480GB", "NVIDIA-GH200-120GB", "NVIDIA-H20"), _standard(12, 24, 48, 96)
    ),
    GpuModel("GH200-144GB", 144, 7, ("NVIDIA-GH200-144G-HBM3e",), _standard(18, 36, 72, 144, _GH200_144_MIB)),
    GpuModel("B200-180GB", 180, 7, ("NVIDIA-B200",), _standard(23, 45, 90, 180, _B200_MIB)),
    GpuModel("GB200-186GB", 186, 7, ("NVIDIA-GB200",), _standard(23, 47, 93, 186, _GB200_MIB, _GB200) + _GB200_EARLY),
    GpuModel("B300-288GB", 269, 7, ("NVIDIA-B300-SXM6-AC",), _standard(34, 67, 135, 269)),
    GpuModel("GB300-278GB", 278, 7, ("NVIDIA-GB300",), _standard(35, 70, 139, 278)),
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
