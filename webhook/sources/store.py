"""Policy texts by source (a ConfigMap, a directory), the last good version of each, and the
engine built from all of them, swapped in whole.

Each source is loaded (parsed, checked, CEL compiled) on its own when it changes, never the
others again. A source whose new version has a bad document keeps its last good version in
force; a source seen for the first time loads its good documents. A policy name another source
already holds is a problem of the newcomer. Problems go to `on_result` (which logs, counts and
tells the source), and so does a source becoming clean again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from policies.engine import Engine
from policies.errors import PolicyProblem
from policies.model.loader import load_texts
from policies.model.policy import GPUPolicy
from policies.model.policyset import PolicySet
from policies.quantity import parse_quantity

log = logging.getLogger("gpu_admission.policies")
Texts = tuple[tuple[str, str], ...]
OnResult = Callable[[str, list[PolicyProblem]], None]
Swap = Callable[[Engine], None]


@dataclass(frozen=True)
class SourceVersion:
    texts: Texts
    policies: tuple[GPUPolicy, ...]


class PolicyStore:
    def __init__(self, swap: Swap, on_result: OnResult | None = None) -> None:
        self._swap_in = swap  # whoever holds the engine in force (webhook.state.EngineHolder.swap)
        self._swapped_once = False
        self.listeners: list[OnResult] = [on_result] if on_result else []
        self._good: dict[str, SourceVersion] = {}
        self._seen: dict[str, tuple[Texts, tuple[PolicyProblem, ...]]] = {}
        self._lock = threading.Lock()
        self._swapped = threading.Condition()
        self.generation = 0

    def wait_for_generation(self, generation: int, timeout: float) -> bool:
        """Block until the set in force is at least `generation` (for callers and tests alike)."""
        with self._swapped:
            return self._swapped.wait_for(lambda: self.generation >= generation, timeout)

    def update(self, source: str, texts: Texts, namespace: str | None = None) -> list[PolicyProblem]:
        """Take a source's new texts if they load cleanly; otherwise keep its last good ones."""
        seen = self._seen.get(source)
        if seen is not None and seen[0] == texts:
            return list(seen[1])  # the same texts again (a relist, a metadata-only change)
        loaded = load_texts(texts, parse_quantity, namespace=namespace)
        problems = list(loaded.problems)
        with self._lock:
            held_elsewhere = {p.name: s for s, v in self._good.items() if s != source for p in v.policies}
            policies = []
            for policy in loaded.policies:
                if policy.name in held_elsewhere:
                    problems.append(_clash(policy, held_elsewhere[policy.name]))
                else:
                    policies.append(policy)
            keep_old = bool(problems) and source in self._good
            if not keep_old:
                self._good[source] = SourceVersion(texts, tuple(policies))
                self._swap()
            self._seen[source] = (texts, tuple(problems))
        if problems:
            verdict = "last good version kept" if keep_old else "good documents loaded, bad ones left out"
            log.error(
                f"policy source has problems: {verdict}",
                extra={"fields": {"source": source, "problems": [str(p) for p in problems]}},
            )
        if seen is None or list(seen[1]) != problems:
            for listener in self.listeners:
                listener(source, problems)
        return problems

    def remove(self, source: str) -> None:
        with self._lock:
            self._seen.pop(source, None)
            if self._good.pop(source, None) is not None:
                self._swap()

    def replace_all(self, sources: dict[str, tuple[Texts, str | None]]) -> None:
        """A full relist: sources not listed are gone; each listed one is judged on its own."""
        for source in set(self._good) - set(sources):
            self.remove(source)
        for source, (texts, namespace) in sorted(sources.items()):
            self.update(source, texts, namespace)
        if not self._swapped_once:  # nothing listed: an empty set is still a set in force
            with self._lock:
                self._swap()

    def _swap(self) -> None:
        from webhook.metrics import GENERATION, POLICIES

        policies = tuple(p for source in sorted(self._good) for p in self._good[source].policies)
        with self._swapped:
            self.generation += 1
            self._swap_in(Engine(PolicySet(policies, self.generation), parse_quantity))
            self._swapped_once = True
            self._swapped.notify_all()
        GENERATION.set(self.generation)
        POLICIES.set(len(policies))
        log.info("policy set swapped", extra={"fields": {"generation": self.generation, "policies": len(policies)}})


def _clash(policy: GPUPolicy, other: str) -> PolicyProblem:
    return PolicyProblem(
        policy.source.file, policy.source.line, policy.name, "metadata.name", f"duplicate policy name (also in {other})"
    )
