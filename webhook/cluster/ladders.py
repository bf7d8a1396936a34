"""Publishes ahead the ResourceClaimTemplates of the DRA claim back-end (policies.planning.ladder):
in every namespace a policy may hold pods of, each ladder its pods may be given
(policies.planning.published), so the admission that names one writes nothing (a dry run creates
nothing) and the pod's claim is made at once.

Every replica publishes: a create is idempotent (a template already there is left as it is), so
none waits on a leader. It runs when the policy set, the namespaces or what DRA shows change, and
once a minute. Templates it made are never deleted: pods may name them still, and a changed
ladder is a new template (it is named by what it holds).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from policies import CATALOG, PolicySet, policy_ladders, why_published
from webhook.cluster.live import LiveCluster
from webhook.service import Loop

log = logging.getLogger("gpu_admission.ladders")
RESYNC_SECONDS = 60.0
# Namespaces the shipped webhook configurations leave out (tools/webhook_manifests.py): no pod
# there is rewritten, so no template is needed.
SKIPPED = frozenset({"kube-system", "kube-node-lease", "kube-public"})

Create = Callable[[str, dict[str, Any]], object]  # (namespace, template); raises ApiException


def _not_published() -> None:
    log.exception("ladder templates not published")


class LadderPublisher:
    def __init__(
        self,
        view: LiveCluster,
        policy_set: Callable[[], PolicySet | None],
        create: Create,
        own_namespace: str = "",
        every: float = RESYNC_SECONDS,
    ) -> None:
        self._view = view
        self._policy_set = policy_set
        self._create = create
        self._skipped = SKIPPED | {own_namespace}
        self._loop = Loop("ladder-templates", lambda _: self.reconcile(), every, _not_published)
        self._reasons: dict[str, str] = {}
        self.published = 0  # templates created by this replica (tests, metrics)

    def wanted(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every template the policies in force want, by (namespace, name)."""
        policy_set = self._policy_set()
        if policy_set is None:
            return {}
        capacity = self._view.capacity
        reasons = {p.name: why for p in policy_set.policies if (why := why_published(p, CATALOG, capacity))}
        policies = [p for p in policy_set.policies if p.name in reasons]
        if reasons != self._reasons:  # said once a change: which policies give claims, and why
            self._reasons = reasons
            for policy in policies:
                log.info(
                    "ladder templates wanted", extra={"fields": {"policy": policy.name, "why": reasons[policy.name]}}
                )
        if not policies:
            return {}
        ladders = {p.name: policy_ladders(p, CATALOG, capacity) for p in policies}
        wanted: dict[tuple[str, str], dict[str, Any]] = {}
        for namespace, labels in self._namespaces().items():
            if namespace in self._skipped:
                continue
            for policy in policy_set.in_namespace(namespace, labels):
                for name, ladder in ladders.get(policy.name, {}).items():
                    wanted[(namespace, name)] = ladder.template(namespace, CATALOG)
        return wanted

    def _namespaces(self) -> Mapping[str, Mapping[str, str]]:
        return self._view.namespaces.all()

    def reconcile(self) -> int:
        """Create the templates wanted that the template watch does not show; how many were made."""
        made = 0
        for (namespace, name), body in self.wanted().items():
            if self._view.claims.demand(namespace, True, name) is not None:
                continue
            try:
                self._create(namespace, body)
            except Exception as error:
                status, text = getattr(error, "status", None), str(getattr(error, "body", "") or error)
                if status == 409:  # there already: another replica's
                    continue
                fields = {"namespace": namespace, "template": name}
                if status == 403 and "being terminated" in text:  # a namespace on its way out
                    log.debug("ladder template not published: namespace terminating", extra={"fields": fields})
                else:
                    log.warning("ladder template not published", extra={"fields": {**fields, "error": text[:200]}})
                continue
            made += 1
            log.info("ladder template published", extra={"fields": {"namespace": namespace, "template": name}})
        self.published += made
        return made

    # -- the thread -------------------------------------------------------------------------------
    def wake(self, *_: object) -> None:
        self._loop.wake()

    @property
    def running(self) -> bool:
        return self._loop.running

    def start(self) -> None:
        self._loop.start()

    def stop(self, wait: bool = True) -> None:
        self._loop.stop(wait)
