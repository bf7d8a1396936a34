"""Telling a GPUPolicy object how it loaded: its status subresource, as `kubectl get gpupolicies`
shows it (READY, IN FORCE) and `kubectl wait --for=condition=Ready` waits on it.

    status:
      observedGeneration: 3
      inForce: current          # current | lastGood | none
      conditions:
        - type: Ready           # True: the object as it is now is in force
          status: "False"
          reason: LastGoodInForce   # Loaded | LastGoodInForce | OutOfForce | NameHeldElsewhere
          message: "gpupolicy/team-a:9 ... (policy team-a, spec.rules[0].expression): ..."
          observedGeneration: 3
          lastTransitionTime: "2026-12-05T03:00:00Z"
      lastGood: |               # the last version that loaded: what a fresh replica keeps in force
        apiVersion: gpu-admission.io/v1alpha1
        ...

Level-triggered: each replica works out the status every object should have from what its store
decided; the status leader writes it where the object's differs (the write comes back as a watch
event whose status then agrees, so nothing loops). A replica that becomes the leader writes every
status that is behind. Writing never stands in the way of loading: a failed call is logged and
tried again at the object's next event or the next leadership.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from policies import PolicyProblem
from webhook.sources.gpupolicy_objects import GROUP, PLURAL, VERSION, gpupolicy_name, name_of
from webhook.sources.store import is_name_clash

log = logging.getLogger("gpu_admission.policy_status")
JSON = dict[str, Any]
MESSAGE_LIMIT = 4096
TIMEOUT = (2.0, 5.0)  # connect, read: a slow API server must not hold up the policy watch
MERGE_PATCH = "application/merge-patch+json"
# What a condition's reason is, by which version is in force (problems or not).
REASONS = {"lastGood": "LastGoodInForce", "none": "OutOfForce", "current": "Rejected"}
MESSAGES = {
    "lastGood": "the last version that loaded stays in force: ",
    "none": "no version ever loaded: the pods it matches are denied until it loads: ",
    "current": "not in force: ",
}


@dataclass(frozen=True)
class Verdict:
    """What the store decided of one object at one generation."""

    generation: int
    problems: tuple[PolicyProblem, ...]
    in_force: str  # current | lastGood | none
    text_in_force: str | None


def desired_status(verdict: Verdict, current: JSON, now: str) -> JSON:
    """The status an object should have; its Ready condition keeps its lastTransitionTime while its
    status stays the same."""
    ready = not verdict.problems
    reason = "Loaded" if ready else REASONS.get(verdict.in_force, "Rejected")
    message = "loaded and in force"
    if not ready:
        message = MESSAGES.get(verdict.in_force, "") + "; ".join(str(p) for p in verdict.problems)
    if verdict.problems and all(is_name_clash(p) for p in verdict.problems):
        reason = "NameHeldElsewhere"
        message = "another source holds this policy's name; this one takes over once that one is gone: " + "; ".join(
            str(p) for p in verdict.problems
        )
    before = next((c for c in current.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"), {})
    status = "True" if ready else "False"
    condition = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "observedGeneration": verdict.generation,
        "lastTransitionTime": before.get("lastTransitionTime") if before.get("status") == status else now,
    }
    desired: JSON = {"observedGeneration": verdict.generation, "inForce": verdict.in_force, "conditions": [condition]}
    kept = ready or verdict.in_force == "lastGood"  # a version that loaded, in force now
    last_good = verdict.text_in_force if kept else current.get("lastGood")
    if last_good:
        desired["lastGood"] = last_good
    if not condition["lastTransitionTime"]:
        condition["lastTransitionTime"] = now
    return desired


def _same(desired: JSON, current: JSON) -> bool:
    return all(current.get(key) == value for key, value in desired.items())


class GPUPolicyStatusWriter:
    def __init__(
        self,
        api: Any,
        leads: Callable[[], bool] = lambda: True,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.api = api  # a CustomObjectsApi
        self.leads = leads
        self.clock = clock
        self._known: dict[str, tuple[Verdict, JSON]] = {}  # name -> its verdict, its status as last seen
        self._lock = threading.Lock()

    def observe(self, obj: JSON, problems: Sequence[PolicyProblem], in_force: str | None, text: str | None) -> None:
        """An object as the watch delivered it, with what the store made of it."""
        name = name_of(obj)
        metadata = obj.get("metadata") or {}
        generation = metadata.get("generation")
        verdict = Verdict(generation if isinstance(generation, int) else 0, tuple(problems), in_force or "none", text)
        status = obj.get("status")
        with self._lock:
            self._known[name] = (verdict, status if isinstance(status, dict) else {})
            if self.leads():
                self._write(name)

    def revise(self, source: str, problems: Sequence[PolicyProblem], in_force: str | None, text: str | None) -> None:
        """The store loaded an object again with no event of its own (a name it wanted freed)."""
        name = gpupolicy_name(source)
        with self._lock:
            known = self._known.get(name or "")
            if name is None or known is None:
                return
            verdict, status = known
            self._known[name] = (Verdict(verdict.generation, tuple(problems), in_force or "none", text), status)
            if self.leads():
                self._write(name)

    def forget(self, name: str) -> None:
        with self._lock:
            self._known.pop(name, None)

    def reconcile(self) -> None:
        """Just became the leader: every status that is behind, written."""
        with self._lock:
            for name in list(self._known):
                self._write(name)

    def _write(self, name: str) -> None:
        verdict, current = self._known[name]
        desired = desired_status(verdict, current, self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"))
        if _same(desired, current):
            return
        try:
            self.api.patch_cluster_custom_object_status(
                GROUP,
                VERSION,
                PLURAL,
                name,
                {"status": desired},
                _content_type=MERGE_PATCH,
                _request_timeout=TIMEOUT,
            )
            self._known[name] = (verdict, desired)
        except Exception as error:  # refused, timed out, gone: the policies are decided already
            if getattr(error, "status", None) == 404:
                self._known.pop(name, None)
                return
            log.warning(
                "could not write a GPUPolicy's status",
                extra={"fields": {"gpupolicy": name, "error": str(error)}},
            )
