"""DRA device selectors drawn with their meaning: each selector's CEL text together with the
predicate it means over a device, so an oracle independent of the engine's reading of CEL says
which devices it admits (the DRA charging law, and the differential test on the real scheduler).

Devices are NVIDIA's driver's as it publishes them (policies.gpu.dra_devices), and another
driver's; the texts use every spelling CEL allows for a literal (quotes, raw strings, escapes),
the macros, bindings, quantities by value and versions. Where Kubernetes' evaluation fails on a
device (a missing attribute), the scheduler cannot allocate it, so a predicate admits nothing there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from policies.gpu.catalog import CATALOG

DRIVER = "gpu.nvidia.com"
GIB = 2**30


@dataclass(frozen=True)
class Device:
    node: str
    name: str
    driver: str
    type: str
    product: str
    profile: str | None
    memory: int | None  # bytes
    version: str  # driverVersion
    weight: Fraction  # GPU-equivalents it holds

    def published(self) -> dict[str, Any]:
        """The device as a ResourceSlice of its driver lists it."""
        attributes: dict[str, Any] = {
            "type": {"string": self.type},
            "productName": {"string": self.product},
            "driverVersion": {"version": self.version},
        }
        if self.profile:
            attributes["profile"] = {"string": self.profile}
        device: dict[str, Any] = {"name": self.name, "attributes": attributes}
        if self.memory is not None:
            device["capacity"] = {"memory": {"value": str(self.memory)}}
        return device


def mig(node: str, name: str, model: str, product: str, profile: str, version: str) -> Device:
    found = CATALOG.model(model)
    made = found.profile(profile)
    assert made is not None
    return Device(node, name, DRIVER, "mig", product, profile, made.memory_gb * GIB, version, found.weight(made))


H100, A100, L40S = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA L40S"
UNIVERSE = [
    Device("node-a", "gpu-0", DRIVER, "gpu", H100, None, 80 * GIB, "550.54.15", Fraction(1)),
    mig("node-a", "gpu-1-mig-0", "H100-80GB", H100, "1g.10gb", "550.54.15"),
    mig("node-a", "gpu-1-mig-1", "H100-80GB", H100, "3g.40gb", "550.54.15"),
    mig("node-b", "gpu-0-mig-0", "A100-40GB", A100, "1g.5gb", "535.104.5"),
    mig("node-b", "gpu-0-mig-1", "A100-40GB", A100, "7g.40gb", "535.104.5"),
    Device("node-b", "gpu-vfio-1", DRIVER, "vfio", A100, None, None, "535.104.5", Fraction(1)),
    Device("node-c", "gpu-0", DRIVER, "gpu", L40S, None, 48 * GIB, "570.86.10", Fraction(1)),
    Device("node-c", "gpu-1", DRIVER, "gpu", L40S, None, 48 * GIB, "570.86.10", Fraction(1)),
    Device("node-c", "nic-0", "nic.example.com", "nic", "ConnectX-7", None, None, "1.0.0", Fraction(0)),
]
PROFILES = sorted({d.profile for d in UNIVERSE if d.profile})
Predicate = Callable[[Device], bool]
Term = tuple[str, Predicate]
NVIDIA = "device.attributes['gpu.nvidia.com']"


def nvidia(d: Device) -> bool:
    return d.driver == DRIVER


def spellings(value: str) -> st.SearchStrategy[str]:
    """The same literal, as the scheduler decodes it, in the spellings CEL allows."""
    hexed = "".join(f"\\x{ord(c):02x}" if c == "a" else c for c in value)
    octal = "".join(f"\\{ord(c):03o}" if c == "g" else c for c in value)
    return st.sampled_from([f"'{value}'", f'"{value}"', f"r'{value}'", f"'{hexed}'", f"'{octal}'", f"'''{value}'''"])


def driver_term() -> st.SearchStrategy[Term]:
    driver = st.sampled_from([DRIVER, "nic.example.com"])
    return driver.flatmap(
        lambda d: spellings(d).map(lambda text, d=d: (f"device.driver == {text}", lambda x, d=d: x.driver == d))
    )


def type_term() -> st.SearchStrategy[Term]:
    kind = st.sampled_from(["gpu", "mig", "vfio"])
    return kind.flatmap(
        lambda t: spellings(t).map(
            lambda text, t=t: (f"{NVIDIA}.type == {text}", lambda x, t=t: nvidia(x) and x.type == t)
        )
    )


def _profile_forms(p: str) -> list[Term]:
    def has(x: Device, p: str = p) -> bool:
        return nvidia(x) and x.profile == p

    return [
        (f"{NVIDIA}.profile == '{p}'", has),
        (f"{NVIDIA}['profile'] in ['{p}']", has),
        (f"['{p}', 'none'].exists(q, has({NVIDIA}.profile) && q == {NVIDIA}.profile)", has),
        (f"cel.bind(a, {NVIDIA}, has(a.profile) && a.profile == '{p}')", has),
    ]


def profile_term() -> st.SearchStrategy[Term]:
    return st.sampled_from(PROFILES).flatmap(lambda p: st.sampled_from(_profile_forms(p)))


def _version(x: Device) -> tuple[int, ...]:
    return tuple(int(p) for p in x.version.split("."))


OTHER_TERMS: list[Term] = [
    (f"{NVIDIA}.productName.startsWith('NVIDIA H100')", lambda x: nvidia(x) and x.product.startswith("NVIDIA H100")),
    (f"{NVIDIA}.productName.contains('A100')", lambda x: nvidia(x) and "A100" in x.product),
    (f"{NVIDIA}.productName.matches('L40')", lambda x: nvidia(x) and "L40" in x.product),
    (f'{NVIDIA}.productName != "x && device.driver == \'nic.example.com"', nvidia),
    (
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        lambda x: nvidia(x) and x.memory is not None and x.memory >= 40 * GIB,
    ),
    (
        "device.capacity['gpu.nvidia.com'].memory == quantity('81920Mi')",
        lambda x: nvidia(x) and x.memory == 80 * GIB,
    ),
    (
        f"{NVIDIA}.driverVersion.isGreaterThan(semver('550.0.0'))",
        lambda x: nvidia(x) and _version(x) > (550, 0, 0),
    ),
    (f"has({NVIDIA}.profile)", lambda x: nvidia(x) and x.profile is not None),
    (f"!has({NVIDIA}.profile)", lambda x: not (nvidia(x) and x.profile is not None)),
    (
        "device.driver == 'nic.example.com' || device.driver == 'gpu.nvidia.com'",
        lambda x: x.driver in ("nic.example.com", DRIVER),
    ),
    ("!(device.driver == 'nic.example.com')", lambda x: x.driver != "nic.example.com"),
    # A domain no device publishes reads as an empty map in Kubernetes, an error in this host.
    ("device.attributes['dra.example.com'].size() == 0", lambda x: True),
]


def term() -> st.SearchStrategy[Term]:
    return st.one_of(driver_term(), type_term(), profile_term(), st.sampled_from(OTHER_TERMS))


def selector() -> st.SearchStrategy[Term]:
    """A conjunction of terms: its text and what it means."""

    def join(terms: list[Term]) -> Term:
        text = " && ".join(f"({t})" for t, _ in terms)
        return text, lambda x: all(p(x) for _, p in terms)

    return st.lists(term(), min_size=1, max_size=3).map(join)
