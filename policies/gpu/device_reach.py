"""What a DRA request can reach: the devices its class's selectors and its own admit, evaluated as
the scheduler evaluates them over every device of NVIDIA's driver the cluster's ResourceSlices
show (policies.gpu.device_cel).

A request is charged the worst device it may get (`Reach.kinds`); one for all the devices its
selectors admit (`allocationMode: All`) the most any one node holds of them (`Reach.nodes`: the
scheduler allocates all of one node's, and devices reachable from several nodes count on each).
Where no shown device is admitted, the reach is not known: charging falls back on what the
selectors prove (a device a later slice may show, or one of a node the watch has not listed).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from policies.gpu.device_cel import DeviceSelector, admits
from policies.gpu.dra_devices import DeviceKind, DraDevice

NodeHolding = tuple[tuple[DeviceKind, int], ...]  # (kind, how many) of one node's admitted devices


class Reach:
    """The devices a request may get, by kind: made once per set of selectors and slices, kept by
    the inventory until its slices change (so compared, and hashed, by identity)."""

    __slots__ = ("kinds", "nodes", "devices")

    def __init__(self, kinds: tuple[DeviceKind, ...], nodes: tuple[NodeHolding, ...], devices: int) -> None:
        self.kinds = kinds  # distinct kinds, in the order first met
        self.nodes = nodes  # distinct holdings of the nodes that have any
        self.devices = devices  # how many devices it admits in all

    def __repr__(self) -> str:
        return f"Reach(kinds={self.kinds!r}, devices={self.devices})"


def reach_of(selectors: tuple[DeviceSelector, ...], devices: Iterable[DraDevice]) -> Reach | None:
    """The devices every one of `selectors` admits; None where none of `devices` is admitted."""
    admitted = [d for d in devices if all(admits(s, d.cel) for s in selectors)]
    if not admitted:
        return None
    kinds = tuple(dict.fromkeys(d.kind for d in admitted))
    everywhere: dict[DeviceKind, int] = {}
    by_node: dict[str, dict[DeviceKind, int]] = {}
    for device in admitted:
        held = everywhere if device.node is None else by_node.setdefault(device.node, {})
        held[device.kind] = held.get(device.kind, 0) + 1
    holdings = []
    for held in by_node.values() or [{}]:
        merged = dict(held)
        for kind, count in everywhere.items():
            merged[kind] = merged.get(kind, 0) + count
        holdings.append(tuple(sorted(merged.items(), key=lambda item: kinds.index(item[0]))))
    return Reach(kinds, tuple(dict.fromkeys(holdings)), len(admitted))


class DeviceReach(Protocol):
    """What a claim's requests are charged by: the cluster's devices (a DraInventory, or the
    edge's guarded one), or none known."""

    @property
    def generation(self) -> int:
        """Changes whenever what `reach` answers may (a slice changed): what is derived from
        reaches is kept per generation."""
        ...

    def reach(self, selectors: tuple[DeviceSelector, ...]) -> Reach | None:
        """The shown devices `selectors` admit; None where no shown device is admitted."""
        ...

    def device(self, key: tuple[str, str, str]) -> DraDevice | None:
        """A shown device by (driver, pool, device), as an allocation result names it."""
        ...


class NoDevices:
    """No device shown: every request is charged by what its selectors prove."""

    generation = 0

    def reach(self, selectors: tuple[DeviceSelector, ...]) -> Reach | None:
        return None

    def device(self, key: tuple[str, str, str]) -> DraDevice | None:
        return None


NO_DEVICES = NoDevices()
