"""DRA ResourceSlices of NVIDIA's driver, the devices claims' allocations hold and the taints
DeviceTaintRules add (policies.gpu.dra_inventory): the free capacity a DRA-only node offers, beside
what node labels say, and what a claim's requests can reach. The inventory is read by admissions
and changed by three watches, so all go through one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from policies import (
    CATALOG,
    DeviceSelector,
    DraDevice,
    DraInventory,
    Reach,
    allocated_devices,
    read_slice,
    read_taint_rule,
)


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _claim(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))


def _lock_free_reads(inventory: DraInventory) -> tuple[bool, int, frozenset[str]]:
    """What admissions read of the slices without the lock: set again as they change."""
    return inventory.known, inventory.generation, inventory.nodes


class DraCapacity:
    """The inventory behind one lock: read by admissions, changed by the watches."""

    def __init__(self) -> None:
        self._inventory = DraInventory()
        self._lock = threading.Lock()
        # Whether any device is shown (policies.gpu.dra_inventory.Inventory), asked of every pod
        # judged, and how many times the slices changed (policies.gpu.device_reach.DeviceReach):
        # plain values, set as the slices change, read without the lock.
        self.known = False
        self.generation = 0
        self.nodes: frozenset[str] = frozenset()  # whose devices the slices show

    def has_model(self, model: str) -> bool:
        with self._lock:
            return self._inventory.has_model(model)

    def offers(self, profile: str | None) -> bool:
        with self._lock:
            return self._inventory.offers(profile)

    def free(self, model: str, profile: str | None) -> int:
        with self._lock:
            return self._inventory.free(model, profile)

    def memory_mib(self, model: str, profile: str) -> int | None:
        with self._lock:
            return self._inventory.memory_mib(model, profile)

    def free_for(
        self, selectors: tuple[DeviceSelector, ...], model: str, profile: str | None, skipped: frozenset[str]
    ) -> int:
        with self._lock:
            return self._inventory.free_for(selectors, model, profile, skipped)

    def offers_for(self, selectors: tuple[DeviceSelector, ...], profile: str | None) -> bool:
        with self._lock:
            return self._inventory.offers_for(selectors, profile)

    def models_for(self, selectors: tuple[DeviceSelector, ...], profile: str | None) -> frozenset[str | None]:
        with self._lock:
            return self._inventory.models_for(selectors, profile)

    # -- read by admissions (policies.gpu.device_reach.DeviceReach) -------------------------------
    def reach(self, selectors: tuple[DeviceSelector, ...]) -> Reach | None:
        with self._lock:
            return self._inventory.reach(selectors)

    def device(self, key: tuple[str, str, str]) -> DraDevice | None:
        with self._lock:
            return self._inventory.device(key)

    # -- the ResourceSlice watch ----------------------------------------------------------------
    def slice_seen(self, kind: str, obj: dict[str, Any]) -> None:
        content = None if kind == "DELETED" else read_slice(obj, CATALOG)
        with self._lock:
            self._inventory.set_slice(_name(obj), content)
            self.known, self.generation, self.nodes = _lock_free_reads(self._inventory)

    def slices_listed(self, items: Iterable[dict[str, Any]]) -> None:
        contents = {_name(obj): read_slice(obj, CATALOG) for obj in items}
        with self._lock:
            self._inventory.replace_slices({k: v for k, v in contents.items() if v is not None})
            self.known, self.generation, self.nodes = _lock_free_reads(self._inventory)

    # -- the ResourceClaim watch: what each claim's allocation holds -----------------------------
    def claim_seen(self, kind: str, obj: dict[str, Any]) -> None:
        devices = () if kind == "DELETED" else allocated_devices(obj)
        with self._lock:
            self._inventory.held.set_allocation(_claim(obj), devices)

    def claims_listed(self, items: Iterable[dict[str, Any]]) -> None:
        allocations = [(_claim(obj), allocated_devices(obj)) for obj in items]
        with self._lock:
            self._inventory.held.replace_allocations(allocations)

    # -- the DeviceTaintRule watch: taints that keep the scheduler off devices --------------------
    def taint_rule_seen(self, kind: str, obj: dict[str, Any]) -> None:
        rule = None if kind == "DELETED" else read_taint_rule(obj)
        with self._lock:
            self._inventory.held.set_taint_rule(_name(obj), rule)

    def taint_rules_listed(self, items: Iterable[dict[str, Any]]) -> None:
        rules = {_name(obj): read_taint_rule(obj) for obj in items}
        with self._lock:
            self._inventory.held.replace_taint_rules({k: v for k, v in rules.items() if v is not None})
