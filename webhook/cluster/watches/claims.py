"""The DRA ResourceClaims and ResourceClaimTemplates of the cluster, as what each asks for
(policies.gpu.claims): a pod that names one is charged what that can allocate, at admission and
while it runs. Only the demand is kept, not the objects.

Claims made by Kubernetes from a template for one pod (they carry the annotation
`resource.kubernetes.io/pod-claim-name`) are kept too: once the pod's status names one, it is
what the pod holds, whatever becomes of the template. They come and go with their pods, which were
charged by the template already, so they never ask for a recharge (their pods' charge follows at
the pod's next event, its binding). A claim's `firstAvailable` requests are trued down to what its
allocation records once the scheduler has allocated it. Any other claim whose demand changes
(allocated, or deleted and made again, which is how a claim's immutable spec changes), and any
template that does, asks for the pods to be charged again (ClaimsChanged).

On an API server without `resource.k8s.io/v1` nothing is listed, so nothing is known: a pod naming
a claim there (DRA's beta versions) is warned of, not charged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from policies import ClaimDemand, InputError, claim_demand, unreadable_claim, with_allocation
from webhook.events import ClaimsChanged, Events

log = logging.getLogger("gpu_admission.claims")
GENERATED = "resource.kubernetes.io/pod-claim-name"
CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
UNREADABLE = unreadable_claim()  # charged as what no budget can hold
Key = tuple[str, bool, str]  # namespace, template, name


def _key(obj: dict[str, Any], template: bool) -> Key:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace", "")), template, str(metadata.get("name", ""))


def _made_for_a_pod(obj: dict[str, Any], template: bool) -> bool:
    return not template and GENERATED in ((obj.get("metadata") or {}).get("annotations") or {})


def _demand(obj: dict[str, Any], template: bool) -> ClaimDemand:
    """What the object asks for (a claim, or a template's `spec.spec`)."""
    spec = obj.get("spec")
    try:
        if template:
            return claim_demand((spec or {}).get("spec"), "spec.spec")
        return with_allocation(claim_demand(spec), obj.get("status"))
    except (InputError, AttributeError) as error:
        log.warning("claim read as unbounded", extra={"fields": {"claim": "/".join(map(str, _key(obj, template)))}})
        log.debug("claim unreadable: %s", error)
        return UNREADABLE


class ClaimCache:
    """What each claim and template asks; a change is published as ClaimsChanged on `events`."""

    def __init__(self, events: Events) -> None:
        self._demands: dict[Key, ClaimDemand] = {}
        self._made: set[Key] = set()  # claims made from a template for one pod
        self._lock = threading.Lock()
        self.listed: set[bool] = set()  # which kinds (template or not) have listed once
        self._events = events

    def demands(self) -> dict[Key, ClaimDemand]:
        return dict(self._demands)

    def demand(self, namespace: str, template: bool, name: str) -> ClaimDemand | None:
        return self._demands.get((namespace, template, name))

    @property
    def complete(self) -> bool:
        return self.listed == {False, True}

    def observer(self, template: bool) -> Callable[[str, dict[str, Any]], None]:
        def observe(kind: str, obj: dict[str, Any]) -> None:
            key = _key(obj, template)
            demand = None if kind == "DELETED" else _demand(obj, template)
            with self._lock:
                before = self._demands.pop(key, None)
                made = key in self._made or _made_for_a_pod(obj, template)
                self._made.discard(key)
                if demand is not None:
                    self._demands[key] = demand
                    if _made_for_a_pod(obj, template):
                        self._made.add(key)
            if made:
                return  # its pod was charged by the template it was made from
            if demand != before and any(d is not None and d.asks_devices for d in (demand, before)):
                self._changed()

        return observe

    def lister(self, template: bool) -> Callable[[Iterable[dict[str, Any]]], None]:
        def replace_all(items: Iterable[dict[str, Any]]) -> None:
            fresh: dict[Key, ClaimDemand] = {}
            made: set[Key] = set()
            for obj in items:
                key = _key(obj, template)
                fresh[key] = _demand(obj, template)
                if _made_for_a_pod(obj, template):
                    made.add(key)
            with self._lock:
                stale = {k: v for k, v in self._demands.items() if k[1] == template and k not in self._made}
                kept = {k: v for k, v in self._demands.items() if k[1] != template}
                self._demands = kept | fresh
                self._made = {k for k in self._made if k[1] != template} | made
                first = template not in self.listed
                self.listed.add(template)
            if not first and stale != {k: v for k, v in fresh.items() if k not in made}:
                self._changed()

        return replace_all

    def _changed(self) -> None:
        self._events.publish(ClaimsChanged())
