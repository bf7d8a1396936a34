"""The GPU catalog: every MIG-capable model, its profiles and how nodes name it.

Data follows shared/reference/mig-profiles.md. Weights are exact fractions (g / slices):
seven 1g slices of a 7-slice GPU are exactly one GPU-equivalent.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from fractions import Fraction

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
WHOLE_GPU_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"


def mixed_resource(profile_name: str) -> str:
    """The extended resource of a profile under migStrategy=mixed ('+' becomes '.')."""
    return MIG_RESOURCE_PREFIX + profile_name.replace("+", ".")


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


@dataclass(frozen=True, slots=True)
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

    def single_strategy_labels(self, profile: Profile) -> tuple[str, ...]:
        """nvidia.com/gpu.product values of this model's nodes under migStrategy=single."""
        return tuple(f"{label}-MIG-{profile.name}" for label in self.product_labels)


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


class CatalogError(ValueError):
    """An unknown model or profile; the message names the closest valid ones."""


def _closest(word: str, choices: list[str]) -> str:
    near = difflib.get_close_matches(word, choices, n=3, cutoff=0.5)
    return f"; closest: {', '.join(near)}" if near else ""


@dataclass(frozen=True)
class Catalog:
    models: tuple[GpuModel, ...] = MODELS
    _by_key: dict[str, GpuModel] = field(init=False, repr=False, compare=False)
    _by_label: dict[str, tuple[GpuModel, Profile | None]] = field(init=False, repr=False, compare=False)
    _profile_names: list[str] = field(init=False, repr=False, compare=False)
    _resource_names: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key = {model.key: model for model in self.models}
        by_key.update({alias: by_key[key] for alias, key in ALIASES.items()})
        by_label: dict[str, tuple[GpuModel, Profile | None]] = {}
        by_resource: dict[str, list[Profile]] = {}
        for model in self.models:
            for label in model.product_labels:
                by_label[label] = (model, None)
            for profile in model.profiles:
                for label in model.single_strategy_labels(profile):
                    by_label[label] = (model, profile)
                by_resource.setdefault(profile.resource, []).append(profile)
        object.__setattr__(self, "_by_key", by_key)
        object.__setattr__(self, "_by_label", by_label)
        object.__setattr__(self, "_profile_names", sorted({p.name for m in self.models for p in m.profiles}))
        object.__setattr__(self, "_resource_names", {r: ps[0].name for r, ps in by_resource.items()})

    def model(self, key: str) -> GpuModel:
        found = self._by_key.get(key)
        if found is None:
            raise CatalogError(f"unknown GPU model {key!r}{_closest(key, sorted(self._by_key))}")
        return found

    def has_model(self, key: str) -> bool:
        return key in self._by_key

    def check_profile(self, name: str, models: tuple[GpuModel, ...] = ()) -> None:
        """Raise CatalogError unless `name` is a profile of one of `models` (any model if none)."""
        pool = models or self.models
        names = sorted({p.name for m in pool for p in m.profiles})
        if name not in names:
            where = f" on {', '.join(m.key for m in models)}" if models else ""
            raise CatalogError(f"unknown MIG profile {name!r}{where}{_closest(name, names)}")

    def profile_for_resource(self, resource: str) -> str | None:
        """The profile name behind a mixed-strategy resource name, e.g. nvidia.com/mig-1g.10gb.me."""
        return self._resource_names.get(resource)

    def from_product_label(self, label: str) -> tuple[GpuModel, Profile | None] | None:
        return self._by_label.get(label)

    def models_with(self, profile_name: str) -> tuple[GpuModel, ...]:
        return tuple(m for m in self.models if m.profile(profile_name) is not None)

    def weight(self, profile_name: str, preferred: tuple[GpuModel, ...] = ()) -> Fraction:
        """GPU-equivalent of a profile: on the first preferred model that has it, else the first model."""
        for model in (*preferred, *self.models):
            profile = model.profile(profile_name)
            if profile is not None:
                return model.weight(profile)
        raise CatalogError(f"unknown MIG profile {profile_name!r}{_closest(profile_name, self._profile_names)}")


CATALOG = Catalog()
