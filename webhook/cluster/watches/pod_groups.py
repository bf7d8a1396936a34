"""The cluster's PodGroups (scheduling.k8s.io, Kubernetes 1.36 on behind the GenericWorkload gate),
as the claims each makes for all its pods: a pod of the group whose template claim matches one
shares that claim with the whole group, so budgets charge it once (policies.review.cluster).

Only the claims are kept. Kubernetes 1.36 serves PodGroups at v1alpha2, 1.37 at v1beta1 (and
v1alpha3); each version listed is kept apart, so one listing never drops another's groups. An
API server that serves none has none: a pod naming a group there is charged its own claims, as
the resourceclaim controller then makes them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from policies import GroupClaims, pod_group_claims
from webhook.events import Events, PodGroupsChanged

GROUP = "scheduling.k8s.io"
VERSIONS = ("v1beta1", "v1alpha2")  # 1.37's, 1.36's
PLURAL = "podgroups"
Key = tuple[str, str]  # namespace, name


def _key(obj: dict[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))


class PodGroupCache:
    """What each PodGroup shares; a change is published as PodGroupsChanged on `events` (its pods
    are charged again)."""

    def __init__(self, events: Events) -> None:
        self._by_version: dict[str, dict[Key, GroupClaims]] = {version: {} for version in VERSIONS}
        self._lock = threading.Lock()
        self._events = events

    def claims(self, namespace: str, name: str) -> GroupClaims | None:
        for groups in self._by_version.values():
            found = groups.get((namespace, name))
            if found is not None:
                return found
        return None

    def lister(self, version: str) -> Callable[[Iterable[dict[str, Any]]], None]:
        def replace_all(items: Iterable[dict[str, Any]]) -> None:
            fresh = {_key(obj): pod_group_claims(obj) for obj in items}
            with self._lock:
                before, self._by_version[version] = self._by_version[version], fresh
            if before != fresh:
                self._changed()

        return replace_all

    def observer(self, version: str) -> Callable[[str, dict[str, Any]], None]:
        def observe(kind: str, obj: dict[str, Any]) -> None:
            key = _key(obj)
            claims = None if kind == "DELETED" else pod_group_claims(obj)
            with self._lock:
                groups = self._by_version[version]
                before = groups.pop(key, None)
                if claims is not None:
                    groups[key] = claims
            # A group that shares no template claim charges its pods as none at all would.
            if claims != before and (claims or before):
                self._changed()

        return observe

    def _changed(self) -> None:
        self._events.publish(PodGroupsChanged())
