"""The background audit, run by the replica that leads the status Lease: on every policy change,
when a node finishes a MIG re-split (`nvidia.com/mig.config.state` turning `success`), and every
`GPU_ADMISSION_AUDIT_SECONDS` (default 600).

The judging runs in a process of its own (`gpu-admission audit --live --write-reports`, at a
lower CPU priority), never in the server's: judging 100,000 pods is tens of seconds of Python,
and in the server's process it would hold the interpreter lock away from admission requests.
The process is given the policies this replica enforces (the store's versions in force), lists
pods, namespaces and nodes in pages, writes the PolicyReports and a few Events, and prints a
summary, from which the violation metric is set. Followers run nothing; triggers that arrive
during a run are folded into one more run after it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from policies import CONFIG_STATE_LABEL
from webhook.environment import AUDIT_SECONDS_DEFAULT
from webhook.metrics import AUDIT_RUNS, AUDIT_SECONDS, AUDIT_VIOLATIONS
from webhook.service import Loop

log = logging.getLogger("gpu_admission.audit")
SETTLED = "success"
Snapshot = Callable[[], list[tuple[str, str, str | None]]]
Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


def run_process(arguments: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI, arguments made here
        [sys.executable, "-m", "webhook.cli", *arguments],
        capture_output=True,
        text=True,
        timeout=1800,
        preexec_fn=lambda: os.nice(10),  # noqa: PLW1509 - no threads in the child before exec
        check=False,
    )


class BackgroundAudit:
    def __init__(
        self,
        snapshot: Snapshot,
        leading: Callable[[], bool],
        every: float = AUDIT_SECONDS_DEFAULT,
        runner: Runner = run_process,
        events: int = 20,
    ) -> None:
        self.snapshot = snapshot
        self.leading = leading
        self.every = every
        self.runner = runner
        self.events = events
        self.runs = 0
        self.last_summary: dict[str, Any] | None = None
        self._why = "start"
        self._states: dict[str, str | None] = {}
        self._violations: set[tuple[str, str]] = set()
        self._loop = Loop(
            "background-audit",
            lambda woken: self.tick(self._why if woken else "periodic"),
            every,
            lambda: log.exception("background audit failed"),
            join=5,
        )

    # -- triggers --------------------------------------------------------------------------------
    def trigger(self, why: str) -> None:
        self._why = why
        self._loop.wake()

    @property
    def pending(self) -> bool:
        """Whether an audit has been asked for and not run yet."""
        return self._loop.pending

    def policy_set_changed(self) -> None:
        self.trigger("policy change")

    def node_seen(self, kind: str, raw: dict[str, Any]) -> None:
        """A node whose MIG re-split has just finished: its pods may ask for what it no longer offers."""
        metadata = raw.get("metadata") or {}
        name, state = str(metadata.get("name", "")), (metadata.get("labels") or {}).get(CONFIG_STATE_LABEL)
        before = self._states.get(name, SETTLED)
        self._states[name] = None if kind == "DELETED" else state
        if kind != "DELETED" and state == SETTLED and before not in (SETTLED, None):
            self.trigger(f"node {name} re-split")

    # -- the loop ------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop.start()

    def stop(self, wait: bool = True) -> None:
        self._loop.stop(wait)

    def tick(self, why: str) -> dict[str, Any] | None:
        """An audit now if this replica leads; followers run nothing."""
        return self.run_once(why) if self.leading() else None

    def run_once(self, why: str) -> dict[str, Any] | None:
        """One audit, in its own process; the summary it printed, or None when it failed."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(self.snapshot(), handle)
        try:
            done = self.runner(
                [
                    "audit",
                    "--live",
                    "--write-reports",
                    "--events",
                    str(self.events),
                    "--policy-snapshot",
                    handle.name,
                    "-o",
                    "summary",
                ]
            )
        finally:
            os.unlink(handle.name)
        self.runs += 1
        try:
            summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            AUDIT_RUNS.labels("failed").inc()
            log.error("background audit (%s) failed: %s", why, done.stderr.strip()[-2000:])
            return None
        AUDIT_RUNS.labels("done").inc()
        AUDIT_SECONDS.set(summary.get("seconds", 0))
        self._publish(summary)
        self.last_summary = summary
        if summary.get("reports_missing"):
            log.warning("background audit (%s): PolicyReports not written: %s", why, summary["reports_missing"])
        log.info(
            "background audit (%s): %s GPU pods judged, %s findings, %s reports written, %s events",
            why,
            summary.get("judged"),
            summary.get("findings"),
            summary.get("reports_written", 0),
            summary.get("events", 0),
        )
        return summary

    def _publish(self, summary: dict[str, Any]) -> None:
        now = {(v["policy"], v["rule"]): v["count"] for v in summary.get("violations") or []}
        for key in self._violations - set(now):
            AUDIT_VIOLATIONS.labels(*key).set(0)
        for key, count in now.items():
            AUDIT_VIOLATIONS.labels(*key).set(count)
        self._violations |= set(now)
