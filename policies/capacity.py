"""Free GPU capacity in the cluster, as the engine sees it: slices of a profile, or whole GPUs,
free on the nodes of one GPU model. The edge fills it from a node and pod watch; without one,
nothing is known and the policy's own order decides."""

from __future__ import annotations

from typing import Protocol


class Capacity(Protocol):
    @property
    def known(self) -> bool:
        """Whether the figures come from the cluster at all."""
        ...

    def free(self, model: str, profile: str | None) -> int:
        """Free slices of `profile` (whole GPUs for None) on nodes of the GPU model `model`."""
        ...


class NoCapacity:
    known = False

    def free(self, model: str, profile: str | None) -> int:
        return 0
