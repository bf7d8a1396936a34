"""The cluster's DRA DeviceClasses (resource.k8s.io/v1), as what each selects and which extended
resource it serves (policies.gpu.device_classes): what a claim naming a class, or a container
asking a class's extended resource, is charged. A change of any class asks for the pods to be
charged again (DeviceClassesChanged), as a change of a claim does.

Until the watch has listed, and on an API server without `resource.k8s.io/v1`, NVIDIA's classes
are read as its driver publishes them and any other as a class that may select any GPU.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from policies import DEFAULT_CLASSES, DeviceClass, DeviceClasses, InputError, read_device_class
from webhook.events import DeviceClassesChanged, Events

log = logging.getLogger("gpu_admission.device_classes")


def _read(obj: dict[str, Any]) -> DeviceClass | None:
    try:
        return read_device_class(obj)
    except InputError as error:
        log.warning("device class unreadable, read as selecting any GPU: %s", error)
        return None


class DeviceClassCache:
    """The DeviceClasses; a change is published as DeviceClassesChanged on `events`."""

    def __init__(self, events: Events) -> None:
        self._classes: dict[str, DeviceClass] = {}
        self._view = DEFAULT_CLASSES
        self._lock = threading.Lock()
        self._events = events

    @property
    def classes(self) -> DeviceClasses:
        return self._view

    def observe(self, kind: str, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        found = None if kind == "DELETED" else _read(obj)
        with self._lock:
            before = self._classes.pop(name, None)
            if found is not None:
                self._classes[name] = found
            self._view = DeviceClasses.of(self._classes.values())
        if found != before:
            self._report_collisions()
            self._changed()

    def replace_all(self, items: Iterable[dict[str, Any]]) -> None:
        fresh = {c.name: c for c in (_read(obj) for obj in items) if c is not None}
        with self._lock:
            first = not self._view.known
            changed = fresh != self._classes
            self._classes = fresh
            self._view = DeviceClasses.of(fresh.values())
        if first or changed:
            self._report_collisions()
        if changed and not first:  # the pods are counted after the first list (wiring)
            self._changed()

    def _report_collisions(self) -> None:
        for name, classes in self._view.collisions():
            log.warning(
                "device classes %s all serve extended resource %s: the scheduler uses the one made last",
                ", ".join(classes),
                name,
            )

    def _changed(self) -> None:
        self._events.publish(DeviceClassesChanged())
