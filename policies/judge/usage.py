"""What a pod holds, in the units quotas count: GPU-equivalents, slices per profile, whole GPUs, pods.

Effective requests follow the scheduler: per resource, the larger of the regular containers'
sum (with native sidecars) and each init container's own need (with the sidecars started before it).
Each resource is charged the most it could hold on any node the pod's scheduling constraints
admit (policies.gpu.placement), never by what an annotation or the pod's own claims say.
Shares of a device (time-sliced replicas, HAMi's vGPUs) are kept apart as `shared_equivalents`,
so a policy may weigh them less (`quota.sharedWeight`, at most 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction

from policies.gpu.catalog import Catalog
from policies.gpu.models import HAMI_RESOURCES
from policies.gpu.placement import Placement, unit_charge
from policies.review.pod import PodView

_ZERO = Fraction(0)  # the zero amount every default and empty sum shares, known by identity


class Usage:
    """What a pod, a reservation or a budget holds. Made several times a review (a pod's charge,
    its claims', the sums a budget is checked on): a plain class (the value-class rule,
    docs/architecture.md), set once in `__init__` and never changed; equal, and hashed, by its
    five amounts."""

    __slots__ = ("gpu_equivalents", "slices", "gpus", "pods", "shared_equivalents", "owned_ratio", "shared_ratio")

    def __init__(
        self,
        gpu_equivalents: Fraction = _ZERO,  # of devices held outright
        slices: Mapping[str, int] | None = None,
        gpus: int = 0,
        pods: int = 0,
        shared_equivalents: Fraction = _ZERO,  # of devices held as shares, at the device's full weight
    ) -> None:
        self.gpu_equivalents = gpu_equivalents
        self.slices: Mapping[str, int] = {} if slices is None else slices
        self.gpus = gpus
        self.pods = pods
        self.shared_equivalents = shared_equivalents
        # The two as (numerator, denominator), derived once: quota checks cross-multiply ints on
        # every review, where even Fraction's properties are Python calls.
        # (The default zero's without a call: most values hold no share, many nothing at all.)
        owned, shared = gpu_equivalents, shared_equivalents
        self.owned_ratio: tuple[int, int] = (0, 1) if owned is _ZERO else owned.as_integer_ratio()
        self.shared_ratio: tuple[int, int] = (0, 1) if shared is _ZERO else shared.as_integer_ratio()

    def _amounts(self) -> tuple[Fraction, Mapping[str, int], int, int, Fraction]:
        return (self.gpu_equivalents, self.slices, self.gpus, self.pods, self.shared_equivalents)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Usage):
            return NotImplemented
        return self._amounts() == other._amounts()

    def __hash__(self) -> int:
        slices = frozenset(self.slices.items())
        return hash((self.gpu_equivalents, slices, self.gpus, self.pods, self.shared_equivalents))

    def __repr__(self) -> str:
        return (
            f"Usage(gpu_equivalents={self.gpu_equivalents!r}, slices={self.slices!r}, gpus={self.gpus!r}, "
            f"pods={self.pods!r}, shared_equivalents={self.shared_equivalents!r})"
        )

    def with_pods(self, pods: int) -> Usage:
        """The same amounts, counted as `pods` pods."""
        return Usage(self.gpu_equivalents, self.slices, self.gpus, pods, self.shared_equivalents)

    def __add__(self, other: Usage) -> Usage:
        # Most sums on the admission path have an empty side (no reservation, no pods yet);
        # Fraction arithmetic costs microseconds a step.
        if other.is_zero:
            return self
        if self.is_zero:
            return other
        slices = dict(self.slices)
        for name, count in other.slices.items():
            slices[name] = slices.get(name, 0) + count
        return Usage(
            _sum(self.gpu_equivalents, self.owned_ratio, other.gpu_equivalents, other.owned_ratio),
            slices,
            self.gpus + other.gpus,
            self.pods + other.pods,
            _sum(self.shared_equivalents, self.shared_ratio, other.shared_equivalents, other.shared_ratio),
        )

    def __sub__(self, other: Usage) -> Usage:
        if other.is_zero:
            return self
        slices = {name: count - other.slices.get(name, 0) for name, count in self.slices.items()}
        return Usage(
            _difference(self.gpu_equivalents, self.owned_ratio, other.gpu_equivalents, other.owned_ratio),
            {k: v for k, v in slices.items() if v},
            self.gpus - other.gpus,
            self.pods - other.pods,
            _difference(self.shared_equivalents, self.shared_ratio, other.shared_equivalents, other.shared_ratio),
        )

    def more_than(self, before: Usage) -> Usage:
        """What this holds beyond `before`, dimension by dimension (nothing where it holds less):
        what an UPDATE adds to a pod's charge."""
        slices = {name: count - before.slices.get(name, 0) for name, count in self.slices.items()}
        return Usage(
            max(Fraction(0), self.gpu_equivalents - before.gpu_equivalents),
            {k: v for k, v in slices.items() if v > 0},
            max(0, self.gpus - before.gpus),
            0,  # the same pod: it is counted once already
            max(Fraction(0), self.shared_equivalents - before.shared_equivalents),
        )

    def times(self, factor: int) -> Usage:
        return Usage(
            self.gpu_equivalents * factor,
            {k: v * factor for k, v in self.slices.items()},
            self.gpus * factor,
            self.pods * factor,
            self.shared_equivalents * factor,
        )

    def per_pod(self) -> Usage:
        """The mean pod of what this holds (counts rounded up; itself if it holds no pod): what
        a share is sized for before any pod asks."""
        if self.pods <= 1:
            return self
        n = self.pods
        return Usage(
            self.gpu_equivalents / n,
            {k: -(-v // n) for k, v in self.slices.items()},
            -(-self.gpus // n),
            1,
            self.shared_equivalents / n,
        )

    def equivalents(self, shared_weight: Fraction | int = 1) -> Fraction:
        """GPU-equivalents, shares weighed at `shared_weight` of their device."""
        if not self.shared_ratio[0]:
            return self.gpu_equivalents
        return self.gpu_equivalents + shared_weight * self.shared_equivalents

    @property
    def empty(self) -> bool:
        return self.pods == 0

    @property
    def is_zero(self) -> bool:
        return not (self.pods or self.gpus or self.owned_ratio[0] or self.slices or self.shared_ratio[0])

    @property
    def holds_anything(self) -> bool:
        return self.pods > 0 or self.owned_ratio[0] > 0 or self.shared_ratio[0] > 0


EMPTY = Usage()


# Reservations are added to and taken from their budgets' totals on every admission, one budget
# at a time, and most amounts are zero (no shares) or cancel (a budget's one reservation going):
# Fraction's own arithmetic costs microseconds a step, so those are answered from the ratios.
def _sum(a: Fraction, a_ratio: tuple[int, int], b: Fraction, b_ratio: tuple[int, int]) -> Fraction:
    if not b_ratio[0]:
        return a
    if not a_ratio[0]:
        return b
    return a + b


def _difference(a: Fraction, a_ratio: tuple[int, int], b: Fraction, b_ratio: tuple[int, int]) -> Fraction:
    if not b_ratio[0]:
        return a
    if a_ratio == b_ratio:
        return _ZERO
    return a - b


def effective_gpu_requests(pod: PodView) -> dict[str, Decimal]:
    """Per GPU resource name, what the scheduler reserves for the pod."""
    regular: dict[str, Decimal] = {}
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for container in pod.init_containers:
        if container.restart_always:
            for name, amount in container.gpus.items():
                sidecars[name] = sidecars.get(name, Decimal(0)) + amount
            continue
        for name, amount in container.gpus.items():
            need = amount + sidecars.get(name, Decimal(0))
            peak[name] = max(peak.get(name, Decimal(0)), need)
    for container in pod.containers:
        for name, amount in container.gpus.items():
            regular[name] = regular.get(name, Decimal(0)) + amount
    for name, amount in sidecars.items():
        regular[name] = regular.get(name, Decimal(0)) + amount
    names = regular.keys() | peak.keys()
    return {n: max(regular.get(n, Decimal(0)), peak.get(n, Decimal(0))) for n in names}


def gpus_held(pod: PodView) -> tuple[tuple[str, int], ...]:
    """(GPU resource, whole units) the scheduler reserves for the pod, the ones it holds at all."""
    return tuple(sorted((name, int(amount)) for name, amount in effective_gpu_requests(pod).items() if amount > 0))


def pod_usage(pod: PodView, catalog: Catalog) -> Usage:
    """Usage of one pod: each GPU resource at the most it could hold where the pod may run."""
    amounts = effective_gpu_requests(pod)
    if not amounts:
        # A KAI or Run:ai share by annotation: the GPU-equivalents it asks for, held outright.
        return Usage(pod.gpu_share, {}, 0, 1) if pod.gpu_share else EMPTY
    # HAMi's GPUs are shares of a device, but one that asks for all of a device's cores or memory
    # holds the device outright, and so does one that bounds no memory: HAMi's chart gives it the
    # whole device's (its default gpumem-percentage is 100).
    hami = (
        not HAMI_RESOURCES.isdisjoint(amounts)
        and any(name in amounts for name in ("nvidia.com/gpumem", "nvidia.com/gpumem-percentage"))
        and not any(amounts.get(name, 0) >= 100 for name in ("nvidia.com/gpucores", "nvidia.com/gpumem-percentage"))
    )
    return charged(amounts, pod.placement, catalog, hami, pods=1, outright=pod.gpu_share)


def charged(
    amounts: Mapping[str, Decimal | int],
    placement: Placement,
    catalog: Catalog,
    hami: bool = False,
    pods: int = 0,
    outright: Fraction = Fraction(0),
) -> Usage:
    """What `amounts` of GPU resources hold, each unit at the most it could hold where
    `placement` admits (a pod's containers, or a DRA claim's request), with `pods` and GPU-
    equivalents held `outright` beside them."""
    slices: dict[str, int] = {}
    gpus = 0
    # Summed over a common denominator in ints, one Fraction at the end: each Fraction operator
    # makes and normalizes a Fraction of its own, microseconds a step.
    owned = [0, 1]  # numerator, denominator
    shared = [0, 1]
    for name, amount in amounts.items():
        charge = unit_charge(catalog.resource(name), placement, catalog, hami)
        count = int(amount)
        if not charge.weight:
            continue
        gpus += charge.gpus * count
        for profile in charge.slices:
            slices[profile] = slices.get(profile, 0) + count
        total = shared if charge.shared else owned
        weight = charge.weight
        total[0] = total[0] * weight.denominator + count * weight.numerator * total[1]
        total[1] *= weight.denominator
    # Fraction's constructor and operators are Python even in the compiled engine: none where zero.
    owned_total = Fraction(owned[0], owned[1]) if owned[0] else _ZERO
    if outright:
        owned_total += outright
    return Usage(owned_total, slices, gpus, pods, Fraction(shared[0], shared[1]) if shared[0] else _ZERO)


FINISHED_PHASES = ("Succeeded", "Failed")


def counts_against_quota(pod: PodView) -> bool:
    """Succeeded and Failed pods free their share; pods being deleted still hold theirs."""
    return pod.phase not in FINISHED_PHASES
