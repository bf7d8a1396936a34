"""Policy texts by source (a ConfigMap, a directory), the last good version of each, and the
engine built from all of them, swapped in whole.

A source whose new version has a bad document keeps its last good version in force; the
problems are reported to the caller (which logs them, counts them, and tells the source).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from policies.engine import Engine
from policies.errors import PolicyProblem
from policies.loader import LoadResult, load_texts
from policies.model import GPUPolicy
from policies.policyset import PolicySet
from webhook.quantity import parse_quantity
from webhook.state import EngineHolder

log = logging.getLogger("gpu_admission.policies")
Texts = tuple[tuple[str, str], ...]


def _load_all(sources: dict[str, Texts]) -> LoadResult:
    """One set from every source, in a stable order (sources sorted by name)."""
    return load_texts([text for source in sorted(sources) for text in sources[source]], parse_quantity)


class PolicyStore:
    def __init__(self, holder: EngineHolder, on_problems: Callable[[str, list[PolicyProblem]], None] | None = None):
        self.holder = holder
        self.on_problems = on_problems
        self._good: dict[str, Texts] = {}
        self._lock = threading.Lock()
        self._swapped = threading.Condition()
        self.generation = 0

    def wait_for_generation(self, generation: int, timeout: float) -> bool:
        """Block until the set in force is at least `generation` (for callers and tests alike)."""
        with self._swapped:
            return self._swapped.wait_for(lambda: self.generation >= generation, timeout)

    def sources(self) -> dict[str, Texts]:
        return dict(self._good)

    def update(self, source: str, texts: Texts) -> list[PolicyProblem]:
        """Take a source's new texts if they load cleanly; otherwise keep its last good ones.

        A source seen for the first time has no last good version: its good documents load and
        its bad ones are reported, as the loader does for any set.
        """
        own = load_texts(texts, parse_quantity)
        problems = list(own.problems)
        with self._lock:
            keep_old = bool(problems) and source in self._good
            if not keep_old:
                candidate = {**self._good, source: texts}
                merged = _load_all(candidate)
                clashes = [p for p in merged.problems if p.file.startswith(source) and p not in problems]
                if clashes and source in self._good:
                    problems, keep_old = clashes, True
                else:
                    problems += clashes
                    self._good = candidate
                    self._swap(merged.policies)
        if problems:
            verdict = "last good version kept" if keep_old else "good documents loaded, bad ones left out"
            log.error(
                f"policy source has problems: {verdict}",
                extra={"fields": {"source": source, "problems": [str(p) for p in problems]}},
            )
            if self.on_problems:
                self.on_problems(source, problems)
        return problems

    def remove(self, source: str) -> None:
        with self._lock:
            if self._good.pop(source, None) is not None:
                merged = _load_all(self._good)
                self._swap(merged.policies)

    def replace_all(self, sources: dict[str, Texts]) -> None:
        """A full relist: sources not listed are gone; each listed one is judged on its own."""
        for source in set(self._good) - set(sources):
            self.remove(source)
        for source, texts in sorted(sources.items()):
            if self._good.get(source) != texts:
                self.update(source, texts)
        if not self.holder.ready:
            self._swap_current()

    def _swap_current(self) -> None:
        with self._lock:
            merged = _load_all(self._good)
            self._swap(merged.policies)

    def _swap(self, policies: tuple[GPUPolicy, ...]) -> None:
        from webhook.metrics import GENERATION, POLICIES

        with self._swapped:
            self.generation += 1
            self.holder.swap(Engine(PolicySet(policies, self.generation), parse_quantity))
            self._swapped.notify_all()
        GENERATION.set(self.generation)
        POLICIES.set(len(policies))
        log.info("policy set swapped", extra={"fields": {"generation": self.generation, "policies": len(policies)}})
