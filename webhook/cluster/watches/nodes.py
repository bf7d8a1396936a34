"""Free GPU capacity, from the node watch (what each node offers) and the pod watch (what the
pods bound to it hold): the `capacity` of the cluster as the engine sees it."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from policies import CATALOG, CapacityLedger, node_gpus, node_uses

Held = tuple[str, tuple[tuple[str, int], ...]]  # a bound pod's node and the GPU amounts it holds there


class NodeCapacity:
    def __init__(self) -> None:
        self.capacity = CapacityLedger(CATALOG)
        self._lock = threading.Lock()

    # -- node events ---------------------------------------------------------------------------
    def observe(self, kind: str, raw: dict[str, Any]) -> None:
        node = node_gpus(raw)
        with self._lock:
            if kind == "DELETED":
                self.capacity.remove_node(node.name)
            else:
                self.capacity.set_node(node)

    def replace_all(self, nodes: Iterable[dict[str, Any]]) -> None:
        parsed = [node_gpus(raw) for raw in nodes]
        with self._lock:
            for name in self.capacity.nodes():
                self.capacity.remove_node(name)
            for node in parsed:
                self.capacity.set_node(node)
            self.capacity.mark_synced()

    # -- what pods hold, as the pod watch shows them -------------------------------------------
    def pod_moved(self, before: Held | None, after: Held | None) -> None:
        """A pod's GPUs left `before`'s node and are held on `after`'s ((node, gpus) or None)."""
        with self._lock:
            if before is not None:
                self.capacity.use(*before, -1)
            if after is not None:
                self.capacity.use(*after)

    def replace_pods(self, held: Iterable[tuple[str | None, tuple[tuple[str, int], ...]]]) -> None:
        """A relist of the pods: what each (node, gpus) holds now."""
        uses = node_uses(held)
        with self._lock:
            self.capacity.replace_uses(uses)
