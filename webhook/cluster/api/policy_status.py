"""Telling a policy ConfigMap how it loaded: a Kubernetes Event and an annotation on it.

A ConfigMap with problems gets a Warning Event (reason PolicyRejected) and the annotation
`gpu-admission.io/load-errors` listing them; once it loads cleanly again, a Normal Event
(PolicyLoaded) and the annotation goes. Reporting never stands in the way of loading: a failed
call is logged and the policies stay as decided. A clean ConfigMap seen for the first time is
also cleared of the annotation (left by an earlier run); removing an absent one writes nothing.

Once every file of a ConfigMap loads, the leader also writes their texts on it
(`gpu-admission.io/last-good`): a replica that starts while the ConfigMap is broken keeps that
version in force instead of none (webhook.sources.store).

Every replica follows every ConfigMap's state, but only the leader (webhook.cluster.api.leadership)
writes: one Event per change cluster-wide, not one per replica. A replica that becomes the
leader sets every annotation to what it knows (the old leader may have died mid-way).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from policies import PolicyProblem
from webhook.sources.configmaps import LAST_GOOD_ANNOTATION, SOURCE_PREFIX, configmap_source

log = logging.getLogger("gpu_admission.policy_status")
LOAD_ERRORS_ANNOTATION = "gpu-admission.io/load-errors"
PERSIST_LIMIT = 128 * 1024  # of the 256 KiB the API server allows all annotations together
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
        leads: Callable[[], bool] = lambda: True,
    ) -> None:
        self.api = api  # a CoreV1Api
        self.identity = identity
        self.clock = clock
        self.leads = leads
        self._latest: dict[str, list[PolicyProblem]] = {}  # source -> its problems now
        self._troubled: set[str] = set()
        self._clean: dict[str, str] = {}  # source -> its texts as JSON, where they all loaded
        self._persisted: dict[str, str] = {}  # source -> what this replica wrote on it
        self._lock = threading.Lock()

    def __call__(self, source: str, problems: list[PolicyProblem]) -> None:
        where = configmap_source(source)
        if where is None:
            return
        with self._lock:
            self._latest[source] = problems
            recovered = not problems and source in self._troubled
            if problems:
                self._troubled.add(source)
            else:
                self._troubled.discard(source)
            if not self.leads():
                return
            self._write(where, problems, event=True, recovered=recovered)

    def persist(self, source: str, texts: tuple[tuple[str, str], ...]) -> None:
        """A ConfigMap whose files all loaded: its texts, on it, for a replica that starts while
        it is broken (webhook.sources.store). Written by the leader, only when they changed."""
        where = configmap_source(source)
        if where is None:
            return
        versions = json.dumps({file.removeprefix(source + "/"): text for file, text in texts}, sort_keys=True)
        with self._lock:
            self._clean[source] = versions
            if self.leads():
                self._persist(where, source, versions)

    def _persist(self, where: tuple[str, str], source: str, versions: str) -> None:
        if self._persisted.get(source) == versions:
            return
        if len(versions) > PERSIST_LIMIT:
            log.warning(
                "policy ConfigMap too large to persist its last good version on it",
                extra={"fields": {"configmap": "/".join(where), "bytes": len(versions)}},
            )
            return
        namespace, name = where
        try:
            patch = {"metadata": {"annotations": {LAST_GOOD_ANNOTATION: versions}}}
            self.api.patch_namespaced_config_map(name, namespace, patch, _request_timeout=TIMEOUT)
            self._persisted[source] = versions
        except Exception as error:  # the versions stay in force here; the next change tries again
            log.warning(
                "could not persist the last good version on the ConfigMap",
                extra={"fields": {"configmap": f"{namespace}/{name}", "error": str(error)}},
            )

    def reconcile(self) -> None:
        """Just became the leader: every ConfigMap's annotation as this replica knows it. Where
        the annotation was not already so (the old leader died before writing, or there was
        none yet), the Event goes too; where it was, the old leader wrote the Event."""
        with self._lock:
            for source, problems in list(self._latest.items()):
                where = configmap_source(source)
                if where is not None and self._annotation(where) != self._text(problems):
                    self._write(where, problems, event=True, recovered=False)
            for source, versions in list(self._clean.items()):
                where = configmap_source(source)
                if where is not None:
                    self._persist(where, source, versions)

    def _annotation(self, where: tuple[str, str]) -> str | None:
        namespace, name = where
        try:
            configmap = self.api.read_namespaced_config_map(name, namespace, _request_timeout=TIMEOUT)
        except Exception:  # gone or unreadable: written (or forgotten) as any other time
            return ""
        return (configmap.metadata.annotations or {}).get(LOAD_ERRORS_ANNOTATION)

    @staticmethod
    def _text(problems: list[PolicyProblem]) -> str | None:
        return "\n".join(str(p) for p in problems)[:ANNOTATION_LIMIT] if problems else None

    def _write(self, where: tuple[str, str], problems: list[PolicyProblem], event: bool, recovered: bool) -> None:
        namespace, name = where
        text = "\n".join(str(p) for p in problems)
        try:
            patch = {"metadata": {"annotations": {LOAD_ERRORS_ANNOTATION: self._text(problems)}}}
            self.api.patch_namespaced_config_map(name, namespace, patch, _request_timeout=TIMEOUT)
            if event and problems:
                summary = f"{len(problems)} problem(s), last good version kept where there was one: {text}"
                self._event(namespace, name, "Warning", "PolicyRejected", summary)
            elif event and recovered:
                self._event(namespace, name, "Normal", "PolicyLoaded", "all policies of this ConfigMap loaded")
        except Exception as error:  # refused, timed out, forbidden: the policies are decided already
            if getattr(error, "status", None) == 404:  # the ConfigMap is gone: nothing to tell
                self._latest.pop(f"{SOURCE_PREFIX}{namespace}/{name}", None)
                return
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
