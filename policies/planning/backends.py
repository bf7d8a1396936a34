"""Which back-end serves a container's MIG slice (the policy's `mig.backend`, `auto` by default),
from what the cluster shows:

- `devicePlugin`: `nvidia.com/mig-<profile>`, as NVIDIA's device plugin advertises it (and GFD
  labels the node), pinned to the picked models' product labels where the name is ambiguous;
- `draExtendedResource`: the same name, served by a DeviceClass from DRA devices (KEP-5004; our
  classes, deploy/components/mig-deviceclasses). DRA nodes carry no GFD label, so no pin: the
  slice is charged by the heaviest model it may land on. Where that could hand the pod a model
  the policy's `gpuModels` leaves out (the profile is another model's too, and DRA serves the
  name on one, or the device plugin serves it as well, or no device is known), a claim is
  written instead: its rungs select the models by product name;
- `draClaim`: a claim from a ResourceClaimTemplate whose request is a `firstAvailable` ladder
  (policies.planning.ladder), charged its worst rung until the allocation trues it down.

`auto`: a name some node serves with a free slice is kept (device plugin, DRA, or both on a mixed
cluster: the scheduler picks the node); where none is free and DRA devices are free for a rung of
the ladder, or where no node serves the name at all and NVIDIA's DRA driver has devices for a
rung, a claim. With nothing known of the cluster (offline, or before the watches list), the
device plugin, as before DRA. With the classes we ship installed, every profile DRA devices show
is served by name, so `auto` gives claims only where names cannot serve.
"""

from __future__ import annotations

from policies.gpu.capacity import Capacity
from policies.gpu.catalog import Catalog
from policies.gpu.models import GpuModel
from policies.model.policy import Backend, MigSpec
from policies.planning.choices import Choice
from policies.planning.ladder import Ladder, ladder_of


class Via:
    """How a rewritten slice reaches its container: the back-end and why, as the `mutated` record
    says it ("" where DRA plays no part, as before DRA), whether the GFD pin holds, and the claim's
    ladder (None: the slice is asked for by name)."""

    __slots__ = ("said", "pinnable", "ladder")

    def __init__(self, said: str = "", pinnable: bool = True, ladder: Ladder | None = None) -> None:
        self.said = said
        self.pinnable = pinnable
        self.ladder = ladder


PLUGIN = Via()


class Backends:
    def __init__(self, policy: str, spec: MigSpec, capacity: Capacity, catalog: Catalog) -> None:
        self.policy = policy
        self.spec = spec
        self.capacity = capacity
        self.catalog = catalog

    def hold(self, resource: str, profile: str) -> tuple[str, tuple[str, ...]]:
        """How a slice served by name through DRA (no GFD pin reaches a DRA node) is held to the
        policy's `gpuModels`: ("", product labels to keep the pod off) where the DRA devices
        serving it are all of those models (the device plugin's nodes of the others kept off by a
        `NotIn` pin, which nodes without the label pass), or (why it cannot be, ()) where DRA
        serves it on another model, or no DRA device is known."""
        allowed = {m.key for m in self.spec.gpu_models}
        others = [m for m in self.catalog.models_with(profile) if m.key not in allowed]
        if not allowed or not others:
            return "", ()
        found = self.capacity.dra_models(resource)
        if found is None:
            return f"{profile} is a slice of {others[0].key} too and no DRA device is known", ()
        outside = sorted(m or "a model the catalog does not know" for m in found if m not in allowed)
        if outside:
            return f"DRA serves {resource} on {', '.join(outside)} too", ()
        if not self.capacity.plugin_serves(resource):
            return "", ()
        return "", tuple(label for m in others for label in m.whole_labels())

    def by_name(self, resource: str, single: bool = False) -> Via:
        """A rename to `resource`: who serves it, as the cluster shows. `single`: the device
        plugin's single strategy (or a GKE pool), which steers `nvidia.com/gpu` by node labels."""
        if single:
            return PLUGIN
        if self.spec.backend is Backend.DRA_EXTENDED_RESOURCE:
            return Via("policy backend draExtendedResource", pinnable=False)
        if self.spec.backend is Backend.DEVICE_PLUGIN:
            return Via("policy backend devicePlugin" if self.capacity.dra_known else "")
        dra = self.capacity.dra_serves(resource)
        if not dra:
            return PLUGIN if not self.capacity.dra_known else Via("backend auto: device plugin")
        if self.capacity.plugin_serves(resource):
            return Via("backend auto: device plugin or DRA extended resource", pinnable=False)
        return Via("backend auto: DRA extended resource", pinnable=False)

    def claim(self, choice: Choice, why: str) -> Via:
        return Via(why, pinnable=False, ladder=self.ladder(choice))

    def ladder(self, choice: Choice) -> Ladder:
        options = tuple((o.profile, o.models) for o in choice.options)
        whole: tuple[GpuModel, ...] | None = None
        if self.spec.whole_gpu_fallback:
            whole = tuple(dict.fromkeys(m for o in choice.options for m in o.models))
        return ladder_of(self.policy, options, whole)

    def claim_instead(self, choice: Choice, best_resource: str) -> Via | None:
        """Under `auto`, where no slice served by name is free: a claim, if DRA devices can serve a
        rung now, or if DRA has devices for a rung and no node serves the name at all (a pod
        asking it could never run)."""
        if self.spec.backend is not Backend.AUTO or not self.capacity.dra_known:
            return None
        ladder = self.ladder(choice)
        offered = any(self.capacity.dra_offers(r.profile.name if r.profile else None) for r in ladder.rungs)
        served = self.capacity.plugin_serves(best_resource) or self.capacity.dra_serves(best_resource)
        if offered and not served:
            return Via(f"backend auto: no node serves {best_resource} by name", False, ladder)
        for rung in ladder.rungs:
            profile = rung.profile.name if rung.profile is not None else None
            if any(self.capacity.dra_free(m.key, profile) for m in rung.models):
                why = "backend auto: no free slice served by name; DRA devices free for the ladder"
                return Via(why, False, ladder)
        return None
