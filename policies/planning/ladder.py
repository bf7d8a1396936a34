"""The DRA claim back-end of the MIG rewrite: a container's whole GPU becomes a claim made from a
ResourceClaimTemplate whose one request is a `firstAvailable` ladder, the slices the policy allows
that hold the container's need, smallest first, on the models it prefers, then (only under
`wholeGpuFallback`) a whole GPU. The scheduler takes the first rung it can allocate.

A ladder is named by what it holds (`<policy>-<first rung>-<digest>`), so the replicas that publish
templates ahead (webhook/cluster/ladders.py) and the rewrite that names one agree without talking,
and a ladder that changes (a policy edited) is a new template, never an old one changed under pods
(a template's spec is immutable anyway). Each rung selects NVIDIA's driver, its `type`, the profile
and, where the policy narrows the models, their product names, in the driver's attribute spellings
(policies.gpu.device_classes reads them back as pinning that profile).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson

from policies.gpu.catalog import Catalog
from policies.gpu.device_cel import NVIDIA_DRIVER
from policies.gpu.models import GpuModel, Profile, label_name

MAX_RUNGS = 8  # a firstAvailable list holds at most 8 entries
REQUEST = "gpu"  # the template's one request
MIG_CLASS = "mig.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MANAGED_BY = "gpu-admission"
LADDER_ANNOTATION = "gpu-admission.io/ladder"
POLICY_ANNOTATION = "gpu-admission.io/policy"
_ATTRIBUTES = f"device.attributes['{NVIDIA_DRIVER}']"


@dataclass(frozen=True, slots=True)
class Rung:
    """One entry of the ladder: a slice of `profile` (None: a whole GPU) on one of `models`."""

    profile: Profile | None
    models: tuple[GpuModel, ...]

    @property
    def name(self) -> str:
        """The entry's name, a DNS label: `1g.10gb+me` -> `1g-10gb-me`, a whole GPU `gpu`."""
        return "gpu" if self.profile is None else label_name(self.profile.name).replace(".", "-")

    def said(self) -> str:
        what = "a whole GPU" if self.profile is None else self.profile.name
        return f"{what} of {'/'.join(m.key for m in self.models)}"

    def sub_request(self, catalog: Catalog) -> dict[str, object]:
        terms = [f"device.driver == '{NVIDIA_DRIVER}'"]
        if self.profile is None:
            terms.append(f"{_ATTRIBUTES}.type == 'gpu'")
            every = catalog.models
        else:
            terms += [f"{_ATTRIBUTES}.type == 'mig'", f"{_ATTRIBUTES}.profile == '{self.profile.name}'"]
            every = catalog.models_with(self.profile.name)
        if set(every) - set(self.models):
            terms.append(f"{_ATTRIBUTES}.productName.matches('{product_pattern(self.models)}')")
        return {
            "name": self.name,
            "deviceClassName": GPU_CLASS if self.profile is None else MIG_CLASS,
            "selectors": [{"cel": {"expression": " && ".join(terms)}}],
            "allocationMode": "ExactCount",
            "count": 1,
        }


def product_pattern(models: tuple[GpuModel, ...]) -> str:
    """An RE2 pattern for the models' NVML product names (a DRA device's `productName`; GFD's label
    is the same name with `-` for each space, so each `-` of a label may be either)."""
    names = sorted({label for model in models for label in model.product_labels})
    return "^(" + "|".join(n.replace(".", "[.]").replace("-", "[ -]") for n in names) + ")$"


@dataclass(frozen=True, slots=True)
class Ladder:
    policy: str
    rungs: tuple[Rung, ...]

    def spec(self, catalog: Catalog) -> dict[str, object]:
        """The ResourceClaimTemplate's spec: the claim each pod gets."""
        entries = [rung.sub_request(catalog) for rung in self.rungs]
        return {"spec": {"devices": {"requests": [{"name": REQUEST, "firstAvailable": entries}]}}}

    def name(self, catalog: Catalog) -> str:
        key = (self, id(catalog))
        found = _NAMES.get(key)
        if found is None:
            digest = hashlib.sha256(orjson.dumps(self.spec(catalog), option=orjson.OPT_SORT_KEYS)).hexdigest()[:8]
            found = f"{self.policy[:200]}-{self.rungs[0].name}-{digest}"
            if len(_NAMES) > 4096:  # ladders come from policies: a few per policy, kept while they live
                _NAMES.clear()
            _NAMES[key] = found
        return found

    def said(self) -> str:
        return ", then ".join(rung.said() for rung in self.rungs)

    def template(self, namespace: str, catalog: Catalog) -> dict[str, object]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {
                "name": self.name(catalog),
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
                "annotations": {POLICY_ANNOTATION: self.policy, LADDER_ANNOTATION: self.said()},
            },
            "spec": self.spec(catalog),
        }


# A ladder's name, worked out once: its spec's digest costs more than the rest of a rewrite.
_NAMES: dict[tuple[Ladder, int], str] = {}


def ladder_of(
    policy: str, options: tuple[tuple[Profile, tuple[GpuModel, ...]], ...], whole: tuple[GpuModel, ...] | None
) -> Ladder:
    """The rungs of `options` (profile and models, best first) in order, at most 8, the last a whole
    GPU of `whole` where one is a fallback (None: none is)."""
    rungs = [Rung(profile, models) for profile, models in options]
    if whole is not None:
        rungs = [*rungs[: MAX_RUNGS - 1], Rung(None, whole)]
    return Ladder(policy, tuple(rungs[:MAX_RUNGS]))


def claim_name(container: str, taken: frozenset[str]) -> str:
    """The pod's `spec.resourceClaims[].name` for a container's ladder claim: a DNS label not yet taken."""
    base = f"gpu-{container}"
    if len(base) > 63:
        base = f"gpu-{container[:48]}-{hashlib.sha256(container.encode()).hexdigest()[:8]}"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base[: 63 - len(str(n)) - 1]}-{n}"
    return name
