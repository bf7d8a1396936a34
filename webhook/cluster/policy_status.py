"""Telling a policy ConfigMap how it loaded: a Kubernetes Event and an annotation on it.

A ConfigMap with problems gets a Warning Event (reason PolicyRejected) and the annotation
`gpu-admission.io/load-errors` listing them; once it loads cleanly again, a Normal Event
(PolicyLoaded) and the annotation goes. Reporting never stands in the way of loading: a failed
call is logged and the policies stay as decided. A clean ConfigMap seen for the first time is
also cleared of the annotation (left by an earlier run); removing an absent one writes nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from policies.errors import PolicyProblem
from webhook.sources.configmaps import configmap_source

log = logging.getLogger("gpu_admission.policy_status")
LOAD_ERRORS_ANNOTATION = "gpu-admission.io/load-errors"
COMPONENT = "gpu-admission"
MESSAGE_LIMIT = 1024
ANNOTATION_LIMIT = 16 * 1024
TIMEOUT = (2.0, 5.0)  # connect, read: a slow API server must not hold up the policy watch


class PolicyStatusReporter:
    def __init__(
        self,
        api: Any,
        identity: str,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.api = api  # a CoreV1Api
        self.identity = identity
        self.clock = clock
        self._troubled: set[str] = set()

    def __call__(self, source: str, problems: list[PolicyProblem]) -> None:
        where = configmap_source(source)
        if where is None:
            return
        namespace, name = where
        text = "\n".join(str(p) for p in problems)
        try:
            annotation = text[:ANNOTATION_LIMIT] if problems else None
            patch = {"metadata": {"annotations": {LOAD_ERRORS_ANNOTATION: annotation}}}
            self.api.patch_namespaced_config_map(name, namespace, patch, _request_timeout=TIMEOUT)
            if problems:
                summary = f"{len(problems)} problem(s), last good version kept where there was one: {text}"
                self._event(namespace, name, "Warning", "PolicyRejected", summary)
                self._troubled.add(source)
            elif source in self._troubled:
                self._event(namespace, name, "Normal", "PolicyLoaded", "all policies of this ConfigMap loaded")
                self._troubled.discard(source)
        except Exception as error:  # refused, timed out, forbidden: the policies are decided already
            log.warning(
                "could not report policy status on the ConfigMap",
                extra={"fields": {"configmap": f"{namespace}/{name}", "error": str(error)}},
            )

    def _event(self, namespace: str, name: str, kind: str, reason: str, message: str) -> None:
        now = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "namespace": namespace},
            "type": kind,
            "reason": reason,
            "message": message[:MESSAGE_LIMIT],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.identity,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.api.create_namespaced_event(namespace, body, _request_timeout=TIMEOUT)
