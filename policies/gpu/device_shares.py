"""Consumable capacity (KEP-5075, beta in Kubernetes 1.36): a device that allows multiple
allocations (`allowMultipleAllocations: true` in its ResourceSlice) is shared by several claims,
each taking part of its capacities (`capacity.<name>`: a total and a `requestPolicy`).

What one allocation takes of a capacity, as the scheduler rounds it (resource.k8s.io/v1
`DeviceCapacity`, `CapacityRequestPolicy`): the amount the request asks (`capacity.requests`),
raised to the policy's smallest valid value at or above it (`validValues`), or to the range's
minimum and then up to a whole step above it (`validRange`); where the request asks nothing of
that capacity, the policy's `default`, or with no policy at all, the whole capacity.

A request is charged the share it takes of its device: the most of any of the device's
capacities, over every device its selectors may get. A request that asks no capacity, or takes
nothing of any capacity (an amount of 0, or one a default of 0 answers: NVIDIA's driver with
unlimited shares), a device that does not allow multiple allocations, or one the cluster does not
show, is a whole device: a share of nothing bounds nothing a container can reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from policies.quantity import parse_quantity

CapacityAsk = tuple[tuple[str, Fraction], ...]  # (capacity name, amount asked), as a request asks


def capacity_name(name: str, driver: str) -> str:
    """A capacity's name without its driver's domain (a device and a request may spell it either way)."""
    return name.removeprefix(f"{driver}/")


def quantity(raw: object) -> Fraction | None:
    """A quantity as an exact fraction; None where it is not one."""
    try:
        return Fraction(parse_quantity(raw))
    except (ValueError, TypeError, ArithmeticError):
        return None


@dataclass(frozen=True, slots=True)
class SharedCapacity:
    """One capacity of a device that allows multiple allocations."""

    name: str
    total: Fraction
    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    minimum: Fraction | None = None
    step: Fraction | None = None

    def consumed(self, asked: Fraction | None) -> Fraction:
        """What one allocation asking `asked` (None: nothing) takes, as the scheduler rounds it;
        the whole capacity where no valid amount fits."""
        if asked is None:
            if self.default is not None:
                return min(self.default, self.total)
            return self.total  # no policy, or one without a default: all of it
        if self.valid_values:
            fitting = [v for v in self.valid_values if v >= asked]
            return min(min(fitting), self.total) if fitting else self.total
        if self.minimum is not None:
            taken = max(asked, self.minimum)
            if self.step:
                steps = -(-(taken - self.minimum) // self.step)  # whole steps above the minimum, rounded up
                taken = self.minimum + steps * self.step
            return min(taken, self.total)
        return min(asked, self.total)


def read_capacities(raw: object, driver: str) -> tuple[SharedCapacity, ...]:
    """A shareable device's `capacity` map; capacities that cannot be read are left out (a device
    with none left is taken whole by any request: share_of returns 1)."""
    found: list[SharedCapacity] = []
    for name, entry in raw.items() if isinstance(raw, Mapping) else ():
        if not isinstance(name, str) or not isinstance(entry, Mapping):
            continue
        total = quantity(entry.get("value"))
        if total is None or total <= 0:
            continue
        policy = entry.get("requestPolicy")
        if not isinstance(policy, Mapping):
            found.append(SharedCapacity(capacity_name(name, driver), total))
            continue
        values = policy.get("validValues")
        valid = tuple(v for v in (quantity(x) for x in values) if v is not None) if isinstance(values, list) else ()
        bounds = policy.get("validRange")
        bounds = bounds if isinstance(bounds, Mapping) else {}
        found.append(
            SharedCapacity(
                capacity_name(name, driver),
                total,
                quantity(policy["default"]) if "default" in policy else None,
                valid,
                quantity(bounds["min"]) if "min" in bounds else None,
                quantity(bounds["step"]) if "step" in bounds else None,
            )
        )
    return tuple(found)


def share_of(capacities: tuple[SharedCapacity, ...], asked: CapacityAsk) -> Fraction:
    """The share of one device an allocation asking `asked` takes: the most of any capacity; the
    whole device where that is nothing at all."""
    if not capacities or not asked:
        return Fraction(1)
    wanted = dict(asked)
    if not wanted.keys() <= {c.name for c in capacities}:
        return Fraction(1)  # a capacity the device does not have: it cannot be met there, take no risk
    share = max(c.consumed(wanted.get(c.name)) / c.total for c in capacities)
    return share if share > 0 else Fraction(1)


def consumed_share(capacities: tuple[SharedCapacity, ...], consumed: CapacityAsk) -> Fraction:
    """The share of a device an allocation holds by what it records it consumed
    (`consumedCapacity`); the whole device where it records nothing or nothing at all."""
    if not capacities or not consumed:
        return Fraction(1)
    totals = {c.name: c.total for c in capacities}
    shares = [amount / totals[name] for name, amount in consumed if name in totals]
    share = min(max(shares, default=Fraction(1)), Fraction(1))
    return share if share > 0 else Fraction(1)
