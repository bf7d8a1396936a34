"""What a DRA ResourceClaim can allocate of NVIDIA's GPUs, read from its spec (resource.k8s.io
v1, v1beta2 and v1beta1; a ResourceClaimTemplate's `spec.spec` is the claim it makes).

Each request for one of NVIDIA's DRA GPU classes (policies.gpu.devices.DRA_GPU_CLASSES, from
NVIDIA's k8s-dra-driver-gpu) becomes what the engine already charges, in resource names:
- `gpu.nvidia.com` and `vfio.gpu.nvidia.com`: `count` whole GPUs;
- `mig.nvidia.com`: `count` slices of the profile its selector pins with
  `device.attributes['gpu.nvidia.com'].profile == '<profile>'`, as `nvidia.com/mig-<profile>`;
  any other selector may pick any MIG device, so a whole GPU's worth each (the most a MIG
  device is);
- `allocationMode: All`: every device the selectors admit, which nothing here can bound
  (`unbounded`: a budget cannot admit it);
- `firstAvailable`: one of its alternatives, so each is kept and charged at the most of them.
Requests of other classes (NICs, NVIDIA's compute-domain channels) hold no GPU. `adminAccess`
requests are charged too: they reach devices, whoever else holds them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from policies.errors import InputError
from policies.gpu.devices import DRA_EXTENDED_PREFIX, DRA_GPU_CLASSES
from policies.gpu.models import MIG_RESOURCE_PREFIX
from policies.json_fields import json_list

MIG_CLASS = "mig.nvidia.com"
# The NVIDIA DRA driver's profile attribute, compared for equality with one literal.
_PROFILE = re.compile(
    r"""^\s*device\.attributes\[\s*['"]gpu\.nvidia\.com['"]\s*\]\.profile\s*==\s*['"]([^'"]+)['"]\s*$"""
)
Ask = tuple[tuple[str, int], ...]  # (resource name, count): one way a request can be met


@dataclass(frozen=True, slots=True)
class ClaimDemand:
    """A claim's GPU requests: per request, the ways it can be met (one of them will be)."""

    requests: tuple[tuple[Ask, ...], ...] = ()
    unbounded: tuple[str, ...] = ()  # names of requests with allocationMode All

    @property
    def holds_gpu(self) -> bool:
        return bool(self.requests or self.unbounded)


NO_DEMAND = ClaimDemand()


def _mapping(raw: object, path: str) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be an object")
    return raw


def _profile(selectors: list[object], path: str) -> str | None:
    for i, selector in enumerate(selectors):
        cel = _mapping(selector, f"{path}[{i}]").get("cel")
        expression = _mapping(cel, f"{path}[{i}].cel").get("expression") if cel is not None else None
        found = _PROFILE.match(expression) if isinstance(expression, str) else None
        if found:
            return found.group(1)
    return None


def _ask(exact: Mapping[str, object], path: str) -> Ask | None:
    """One way to meet a request: None if it is all devices; () if it holds no GPU."""
    device_class = exact.get("deviceClassName")
    if device_class not in DRA_GPU_CLASSES:
        return ()
    if exact.get("allocationMode", "ExactCount") == "All":
        return None
    count = exact.get("count", 1)
    if type(count) is not int or count < 1:
        raise InputError(f"{path}.count", "must be a whole number, 1 or more")
    profile = _profile(json_list(exact.get("selectors"), f"{path}.selectors"), f"{path}.selectors")
    if device_class == MIG_CLASS and profile is not None:
        return ((MIG_RESOURCE_PREFIX + profile, count),)
    return ((f"{DRA_EXTENDED_PREFIX}{device_class}", count),)


def claim_demand(spec: object, path: str = "spec") -> ClaimDemand:
    """The demand of a ResourceClaimSpec (`spec` of a claim, `spec.spec` of a template)."""
    devices = _mapping(spec, path).get("devices")
    if devices is None:
        return NO_DEMAND
    devices = _mapping(devices, f"{path}.devices")
    path = f"{path}.devices.requests"
    requests: list[tuple[Ask, ...]] = []
    unbounded: list[str] = []
    for i, raw in enumerate(json_list(devices.get("requests"), path)):
        request = _mapping(raw, f"{path}[{i}]")
        name = str(request.get("name", i))
        if "firstAvailable" in request:
            options = json_list(request.get("firstAvailable"), f"{path}[{i}].firstAvailable")
            alternatives = [
                _ask(_mapping(o, f"{path}[{i}].firstAvailable[{j}]"), f"{path}[{i}].firstAvailable[{j}]")
                for j, o in enumerate(options)
            ]
        else:  # v1 and v1beta2 say `exactly`; v1beta1 has the fields on the request itself
            exact = request.get("exactly", request)
            alternatives = [_ask(_mapping(exact, f"{path}[{i}].exactly"), f"{path}[{i}].exactly")]
        if any(a is None for a in alternatives):
            unbounded.append(name)
        elif any(alternatives):
            requests.append(tuple(a for a in alternatives if a is not None))
    return ClaimDemand(tuple(requests), tuple(unbounded))
