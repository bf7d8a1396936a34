"""Namespaced policies with least privilege: the webhook reads ConfigMaps only in the namespaces
a platform team opened to team policies, each by a label on the namespace
(`gpu-admission.io/policies=enabled`) and a RoleBinding there that lets the webhook read them. A
ConfigMap watch runs per such namespace, started and stopped as the namespace watch sees the label
come and go; a namespace that loses it loses its policies. A namespace labelled without the
RoleBinding is refused by the API server (403): its watch retries with backoff and says so in the
log, and no other namespace is held up."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from webhook.cluster.watches.listwatch import ListWatch
from webhook.sources.configmaps import ENABLED, POLICIES_LABEL, SOURCE_PREFIX
from webhook.sources.store import PolicyStore

log = logging.getLogger("gpu_admission.watch")
JSON = dict[str, Any]


def opened(namespace: JSON) -> bool:
    return ((namespace.get("metadata") or {}).get("labels") or {}).get(POLICIES_LABEL) == ENABLED


class PolicyNamespaces:
    """One ConfigMap watch per opened namespace; `observe` and `replace_all` follow the namespaces."""

    def __init__(self, watch_of: Callable[[str], ListWatch], store: PolicyStore, own_namespace: str) -> None:
        self.watch_of = watch_of  # the policy ConfigMap watch of a namespace (webhook.cluster.wiring)
        self.store = store
        self.own = own_namespace
        self.watches: dict[str, ListWatch] = {}
        self._lock = threading.Lock()

    def observe(self, kind: str, namespace: JSON) -> None:
        name = str((namespace.get("metadata") or {}).get("name", ""))
        self._set(name, kind != "DELETED" and opened(namespace))

    def replace_all(self, namespaces: Iterator[JSON]) -> None:
        wanted = {str(n["metadata"]["name"]) for n in namespaces if opened(n)}
        with self._lock:
            running = set(self.watches)
        for name in running - wanted:
            self._set(name, False)
        for name in sorted(wanted):
            self._set(name, True)

    def start(self) -> None:
        """Nothing of its own to start: a team's watch opens as its namespace is seen."""

    def stop(self, wait: bool = True) -> None:
        """Every team's watch told to stop, none waited for (each ends on its own): `wait` is the
        Service protocol's, and a replica on its way out need not wait for a team's watch."""
        with self._lock:
            watches, self.watches = list(self.watches.values()), {}
        for watch in watches:
            watch.stop(wait=False)

    def _set(self, name: str, open_: bool) -> None:
        if not name or name == self.own:  # the webhook's own namespace is watched for cluster policies
            return
        with self._lock:
            running = self.watches.get(name)
            if open_ and running is None:
                self.watches[name] = watch = self.watch_of(name)
                watch.start()
                log.info("watching team policies", extra={"fields": {"namespace": name}})
            elif not open_ and running is not None:
                del self.watches[name]
        if not open_ and running is not None:
            running.stop(wait=False)
            self.store.replace_all({}, within=f"{SOURCE_PREFIX}{name}/")
            log.info("team policies closed", extra={"fields": {"namespace": name}})
