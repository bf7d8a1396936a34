"""Policy texts by source (a ConfigMap, a directory), the last good version of each of their files,
and the engine built from all of them, swapped in whole.

A source is loaded (parsed, checked, CEL compiled) on its own when it changes, never the others
again, and within it only the files (ConfigMap keys) whose text changed. Loading is total:
whatever is wrong with a file (undecodable bytes, YAML, a value no check foresaw, no document at
all because it is empty or was cut off) is a problem of that file, and the file's last good
version stays in force; a file seen for the first time loads its good documents. Removing a file
(or a ConfigMap key) removes its policies. A policy name another file already holds is a problem
of the newcomer. Problems are published per source (webhook.events.SourceProblems: logged,
counted and told to the source), and so is a source becoming clean again.

No policy lapses silently. A source may come with the versions a replica persisted in the
cluster once they loaded (a ConfigMap's `gpu-admission.io/last-good`): a bad file with no last
good version here (a fresh replica) takes that one. A bad file with none at all is out of force
and fails closed (policies.model.policyset.Lapsed): the pods it could hold are denied, naming it,
until it loads. A file kept out only for a policy name another file holds loads again once the
policies in force change (SourceRetried). Each source whose files all loaded is published
(SourceLoaded), to persist them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from policies import BUILT_IN_TABLE, Engine, GPUPolicy, Lapsed, PolicyProblem, PolicySet, WorkloadKind, load_texts
from webhook.events import Events, SourceLoaded, SourceProblems, SourceRetried

log = logging.getLogger("gpu_admission.policies")
Texts = tuple[tuple[str, str], ...]
Swap = Callable[[Engine], None]


@dataclass(frozen=True)
class FileVersion:
    text: str
    policies: tuple[GPUPolicy, ...]
    workloads: tuple[WorkloadKind, ...] = ()
    namespace: str | None = None  # a ConfigMap's outside the webhook's namespace: namespaced policies


@dataclass(frozen=True)
class Seen:
    """A file's text as last seen, with its problems (an unreadable file has no text)."""

    text: str | None
    problems: tuple[PolicyProblem, ...]


class PolicyStore:
    """The sources' files and the engine built from them; what happens to a source is published
    on `events` (the replica's hub: webhook.state.EngineHolder.events)."""

    def __init__(self, swap: Swap, events: Events) -> None:
        self._swap_in = swap  # whoever holds the engine in force (webhook.state.EngineHolder.swap)
        self._swapped_once = False
        self._events = events
        self._good: dict[str, dict[str, FileVersion]] = {}  # source -> file -> last good version
        self._seen: dict[str, dict[str, Seen]] = {}  # source -> file -> as last seen
        self._lapsed: dict[str, dict[str, Lapsed]] = {}  # source -> file -> out of force
        self._lock = threading.Lock()
        self._swapped = threading.Condition()
        self.generation = 0

    def wait_for_generation(self, generation: int, timeout: float) -> bool:
        """Block until the set in force is at least `generation` (for callers and tests alike)."""
        with self._swapped:
            return self._swapped.wait_for(lambda: self.generation >= generation, timeout)

    def problems_of(self, source: str) -> list[PolicyProblem]:
        with self._lock:
            return _problems(self._seen.get(source, {}))

    def update(
        self,
        source: str,
        texts: Texts,
        namespace: str | None = None,
        unreadable: Iterable[PolicyProblem] = (),
        persisted: Mapping[str, str] | None = None,
    ) -> list[PolicyProblem]:
        """Take a source's files as they are now: each loads if clean, else keeps its last good
        version (here, else `persisted` in the cluster), else fails closed; `unreadable` files
        (with why) could not even be read and count as bad ones."""
        broken = {p.file: p for p in unreadable}
        present = {file for file, _ in texts} | set(broken)
        persisted = persisted or {}
        with self._lock:
            first = source not in self._seen
            before = _problems(self._seen.get(source, {}))
            seen = self._seen.setdefault(source, {})
            good = self._good.setdefault(source, {})
            lapsed = self._lapsed.setdefault(source, {})
            changed = False
            for file in [f for f in {*seen, *good, *lapsed} if f not in present]:
                seen.pop(file, None)
                changed |= lapsed.pop(file, None) is not None
                changed |= good.pop(file, None) is not None  # removed: its policies go
            for file, problem in broken.items():
                seen[file] = Seen(None, (problem,))
                if file in good:
                    continue  # its last good version stays in force
                if self._take_persisted(source, file, persisted.get(file), namespace):
                    changed = True
                else:
                    changed |= self._lapse(source, file, namespace, [problem], [])
            for file, text in texts:
                last = seen.get(file)
                if last is not None and last.text == text:
                    continue  # unchanged: a relist, another key's edit
                changed |= self._load(source, file, text, namespace, persisted.get(file))
            retried = self._retry_shadowed(exclude=source) if changed else []
            if changed or not self._swapped_once:
                self._swap()
            problems = _problems(self._seen.get(source, {}))
        self._report(source, None if first else before, problems)
        self._report_retried(retried)
        if not problems and (changed or first):
            # Persisting never stands in the way of loading.
            self._events.publish(SourceLoaded(source, texts), _failed(source, "policy persistence failed"))
        return problems

    def _load(self, source: str, file: str, text: str, namespace: str | None, persisted: str | None = None) -> bool:
        """Load one file under the lock; whether the policies in force changed."""
        problems, policies, workloads = self._loaded(file, text, namespace)
        self._seen[source][file] = Seen(text, tuple(problems))
        good = self._good[source]
        if problems and file in good:
            return False  # the last good version stays in force
        if problems and persisted != text and self._take_persisted(source, file, persisted, namespace):
            return True
        good[file] = FileVersion(text, tuple(policies), workloads, namespace)
        self._lapse(source, file, namespace, problems, policies)
        return True

    def _loaded(
        self, file: str, text: str, namespace: str | None
    ) -> tuple[list[PolicyProblem], list[GPUPolicy], tuple[WorkloadKind, ...]]:
        loaded = load_texts(((file, text),), namespace=namespace)
        problems = list(loaded.problems)
        held = {p.name: f for s, files in self._good.items() for f, v in files.items() for p in v.policies}
        policies = []
        for policy in loaded.policies:
            other = held.get(policy.name)
            if other is not None and other != file:
                problems.append(name_clash(policy, other))
            else:
                policies.append(policy)
        return problems, policies, loaded.workloads

    def _take_persisted(self, source: str, file: str, persisted: str | None, namespace: str | None) -> bool:
        """A bad file with no last good version here: the one persisted in the cluster, if there
        is one and it loads cleanly (then in force). Whether it was taken."""
        if persisted is None:
            return False
        problems, policies, workloads = self._loaded(file, persisted, namespace)
        if problems:
            return False
        self._good[source][file] = FileVersion(persisted, tuple(policies), workloads, namespace)
        self._lapsed[source].pop(file, None)
        log.warning(
            "policy file has problems: its last good version persisted in the cluster is in force",
            extra={"fields": {"source": source, "file": file}},
        )
        return True

    def _lapse(
        self,
        source: str,
        file: str,
        namespace: str | None,
        problems: list[PolicyProblem],
        loaded: list[GPUPolicy],
    ) -> bool:
        """Mark what of a file never loaded (whether that changed): the policies its problems
        name that no version holds, or the whole file where they name none."""
        held = {p.name for files in self._good.values() for v in files.values() for p in v.policies}
        names = sorted({p.policy for p in problems if p.policy and p.policy not in held} - {p.name for p in loaded})
        nameless = [p for p in problems if not p.policy and not is_name_clash(p)]
        before = self._lapsed[source].get(file)
        if names or nameless:
            why = str((nameless or [p for p in problems if p.policy in names])[0].message)
            now = Lapsed(", ".join(names) or file, file, namespace, why)
            self._lapsed[source][file] = now
            return now != before
        self._lapsed[source].pop(file, None)
        return before is not None

    def in_force(self, source: str, file: str) -> tuple[str | None, str | None]:
        """Which version of a file is in force, and its text: "current" (its text as last seen),
        "lastGood" (an earlier one, the current having problems), "none" (it fails closed); None
        if never seen."""
        with self._lock:
            seen = self._seen.get(source, {}).get(file)
            if seen is None:
                return None, None
            good = self._good.get(source, {}).get(file)
            if file in self._lapsed.get(source, {}) or good is None or (seen.problems and not good.policies):
                return "none", None
            return ("current" if good.text == seen.text else "lastGood"), good.text

    def snapshot(self) -> list[tuple[str, str, str | None]]:
        """(file, text, namespace) of every version in force: what a background audit process
        loads to judge with exactly the policies of this replica."""
        with self._lock:
            return [(f, v.text, v.namespace) for files in self._good.values() for f, v in sorted(files.items())]

    def remove(self, source: str) -> None:
        retried = []
        with self._lock:
            before = _problems(self._seen.get(source, {}))
            self._seen.pop(source, None)
            lapsed = self._lapsed.pop(source, None)
            if self._good.pop(source, None) or lapsed:
                retried = self._retry_shadowed(exclude=source)
                self._swap()
        if before:
            self._report(source, before, [])
        self._report_retried(retried)

    def _report_retried(self, retried: list[tuple[str, list[PolicyProblem], list[PolicyProblem]]]) -> None:
        for source, was, now in retried:
            self._report(source, was, now)
            self._events.publish(SourceRetried(source, now), _failed(source))

    def _retry_shadowed(self, exclude: str) -> list[tuple[str, list[PolicyProblem], list[PolicyProblem]]]:
        """Files kept out for a policy name another file held, loaded again once the policies in
        force changed: a policy moved from one source to another (a ConfigMap's to a GPUPolicy
        object) takes over when the old one goes, with no edit of the new. Under the lock; the
        sources whose problems changed, to report."""
        changed = []
        for source, files in self._seen.items():
            shadowed = [
                (file, seen.text, version.namespace)
                for file, seen in files.items()
                if seen.text is not None
                and (version := self._good.get(source, {}).get(file)) is not None
                and any(is_name_clash(p) for p in seen.problems)
            ]
            if source == exclude or not shadowed:
                continue
            before = _problems(self._seen.get(source, {}))
            for file, text, namespace in shadowed:
                self._load(source, file, text, namespace)
            if (after := _problems(self._seen.get(source, {}))) != before:
                changed.append((source, before, after))
        return changed

    def replace_all(
        self,
        sources: Mapping[str, tuple[Texts, str | None]],
        within: str = "",
        persisted: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """A full relist: sources not listed are gone (of those named `within...` only, where one
        watch lists a part of them: one namespace's ConfigMaps); each listed one is judged on its
        own, and one that cannot be (a bug) is logged and skipped, never holding up the others."""
        for source in set(self._seen) - set(sources):
            if source.startswith(within):
                self.remove(source)
        for source, (texts, namespace) in sorted(sources.items()):
            try:
                self.update(source, texts, namespace, persisted=(persisted or {}).get(source))
            except Exception:
                log.exception("policy source could not be loaded", extra={"fields": {"source": source}})
        if not self._swapped_once:  # nothing listed: an empty set is still a set in force
            with self._lock:
                self._swap()

    def _report(self, source: str, before: list[PolicyProblem] | None, problems: list[PolicyProblem]) -> None:
        """Log and tell the listeners when a source's problems changed (or it is seen first)."""
        if problems and problems != before:
            log.error(
                "policy source has problems: the last good version of each bad file is kept",
                extra={"fields": {"source": source, "problems": [str(p) for p in problems]}},
            )
        if problems != before:  # reporting never stands in the way of loading
            self._events.publish(SourceProblems(source, problems), _failed(source))

    def _swap(self) -> None:
        from webhook.metrics import GENERATION, OUT_OF_FORCE, POLICIES

        versions = [self._good[source][file] for source in sorted(self._good) for file in sorted(self._good[source])]
        policies = tuple(policy for version in versions for policy in version.policies)
        workloads = BUILT_IN_TABLE.with_kinds(tuple(kind for version in versions for kind in version.workloads))
        lapsed = tuple(
            self._lapsed[source][file] for source in sorted(self._lapsed) for file in sorted(self._lapsed[source])
        )
        with self._swapped:
            self.generation += 1
            self._swap_in(Engine(PolicySet(policies, self.generation, workloads=workloads, lapsed=lapsed)))
            self._swapped_once = True
            self._swapped.notify_all()
        GENERATION.set(self.generation)
        POLICIES.set(len(policies))
        OUT_OF_FORCE.set(len(lapsed))
        for each in lapsed:
            log.error(
                "policy out of force: it never loaded, and fails closed",
                extra={"fields": {"policy": each.policy, "file": each.file, "why": each.why}},
            )
        log.info("policy set swapped", extra={"fields": {"generation": self.generation, "policies": len(policies)}})


NAME_CLASH = "duplicate policy name"


def is_name_clash(problem: PolicyProblem) -> bool:
    """A problem that is only a policy name another source's policy holds (name_clash)."""
    return problem.message.startswith(NAME_CLASH)


def name_clash(policy: GPUPolicy, other: str) -> PolicyProblem:
    """The problem of a policy whose name the policy of file `other` holds."""
    return PolicyProblem(
        policy.source.file, policy.source.line, policy.name, "metadata.name", f"{NAME_CLASH} (also in {other})"
    )


def _failed(source: str, what: str = "policy status listener failed") -> Callable[[], None]:
    """What a reactor's failure leaves: a log line with its traceback, the source named."""
    return lambda: log.exception(what, extra={"fields": {"source": source}})


def _problems(seen: Mapping[str, Seen]) -> list[PolicyProblem]:
    """The problems of a source's files, as last seen."""
    return [p for file in seen.values() for p in file.problems]
