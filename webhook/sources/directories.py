"""Policies from directories (a mounted ConfigMap volume), reloaded when their files change.

A file is loaded when its writer is done with it. The kernel says so (inotify, through watchdog):
a file written and closed, or renamed into place (how editors save, and how kubelet's atomic
writer swaps a mounted ConfigMap's `..data` symlink), is loaded at once; a file still open for
writing is never loaded, however long its writer holds it, so a policy caught half-written never
takes the last good version out of force. The check compares the resolved files' identities, not
directory mtimes. Where the kernel cannot tell (no inotify, or too many watches), a change is
loaded once it has held still for a whole interval (same size, inode and mtime at two checks in a
row), and a kubelet-written directory at once. A file whose bytes are no UTF-8 is a problem of
that file.
Nothing stops the watcher: a check that fails is logged with its traceback and tried again at the
next interval, and `healthy` says whether the last check got through.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from policies import PolicyProblem
from webhook.sources.policy_files import POLICY_SUFFIXES
from webhook.sources.store import PolicyStore

log = logging.getLogger("gpu_admission.directories")
Signature = tuple[tuple[str, int, int, int], ...]


def _atomically_written(directory: Path) -> bool:
    """Kubelet's ConfigMap and projected volumes: files reached through a `..data` symlink that
    is swapped whole."""
    return (directory / "..data").is_symlink()


class Writers(FileSystemEventHandler):
    """What inotify says of a directory's files: which are open for writing now, and whether a
    write was finished (a file closed after writing, or one renamed in) since the last load."""

    def __init__(self, woken: threading.Event) -> None:
        self._lock = threading.Lock()
        self._open: set[str] = set()  # paths written to and not yet closed
        self._done: set[str] = set()  # directories with a write finished since they were loaded
        self._woken = woken

    def open_in(self, directory: Path) -> bool:
        key = str(directory)
        with self._lock:
            return any(str(Path(path).parent) == key for path in self._open)

    def take_done(self, directory: Path) -> bool:
        with self._lock:
            if str(directory) in self._done:
                self._done.discard(str(directory))
                return True
            return False

    def on_modified(self, event: FileSystemEvent) -> None:  # IN_MODIFY: written to (not attributes)
        if not event.is_directory:
            with self._lock:
                self._open.add(str(event.src_path))

    on_created = on_modified  # made (O_CREAT): being written until closed, or renamed away

    def on_closed(self, event: FileSystemEvent) -> None:  # IN_CLOSE_WRITE: the writer is done
        self._finished(str(event.src_path))

    def on_moved(self, event: FileSystemEvent) -> None:  # renamed into place: whole when it lands
        with self._lock:
            self._open.discard(str(event.src_path))
        self._finished(str(event.dest_path))

    def on_deleted(self, event: FileSystemEvent) -> None:
        self._finished(str(event.src_path))

    def _finished(self, path: str) -> None:
        with self._lock:
            self._open.discard(path)
            self._done.add(str(Path(path).parent))
        self._woken.set()


class DirectoryWatcher:
    def __init__(self, directories: list[Path], store: PolicyStore, interval: float = 2.0) -> None:
        self.directories = directories
        self.store = store
        self.interval = interval
        self.name = "policy directories"
        self.error = ""  # why the last check failed; empty when it got through
        self._loaded: dict[Path, Signature] = {}
        self._settling: dict[Path, Signature] = {}
        self._held: set[Path] = set()  # directories whose change waits for a writer to close a file
        self._stop = threading.Event()
        self._woken = threading.Event()  # a writer finished: check now, not at the next interval
        self._thread: threading.Thread | None = None
        self._writers: Writers | None = None  # None: the kernel is not asked (settle instead)
        self._observer: Any = None
        self._checks = threading.Condition()
        self.checks = 0  # checks done since start (tests wait on them instead of sleeping)

    @property
    def alive(self) -> bool:
        """Its thread runs (or was never started)."""
        return self._thread is None or self._thread.is_alive()

    @property
    def healthy(self) -> bool:
        return self.alive and not self.error

    def _signature(self, directory: Path) -> Signature:
        found = []
        for path in sorted(directory.iterdir()):
            if path.name.startswith(".") or path.suffix not in POLICY_SUFFIXES or not path.is_file():
                continue
            stat = path.stat()  # follows the ..data symlink
            found.append((path.name, stat.st_ino, stat.st_mtime_ns, stat.st_size))
        return tuple(found)

    def check_once(self, settle: bool = True) -> bool:
        """Load every directory whose files changed and have held still since the last check
        (`settle` False: load what is there now, as at start); True if any was loaded."""
        changed = False
        errors = []
        for directory in self.directories:
            try:
                changed |= self._check(directory, settle)
            except Exception as error:  # unreadable now: keep what is loaded, say so, try again
                errors.append(f"{directory}: {error}")
                log.warning(
                    "policy directory unreadable, keeping what is loaded",
                    extra={"fields": {"directory": str(directory), "error": str(error)}},
                )
        self.error = "; ".join(errors)
        return changed

    def _check(self, directory: Path, settle: bool) -> bool:
        signature = self._signature(directory)
        writers = self._writers
        if signature == self._loaded.get(directory):
            self._settling.pop(directory, None)
            if writers is not None:
                writers.take_done(directory)
            return False
        if writers is not None and settle:
            if writers.open_in(directory):  # a writer holds a file open: not done, however long it takes
                if directory not in self._held:  # said once until it loads: never silent
                    self._held.add(directory)
                    log.warning(
                        "policy directory changed; loaded once its writer closes the file",
                        extra={"fields": {"directory": str(directory)}},
                    )
                return False
            if writers.take_done(directory) or _atomically_written(directory):
                return self._load(directory, signature)
        if settle and not _atomically_written(directory) and self._settling.get(directory) != signature:
            self._settling[directory] = signature  # changed since the last look: let it settle
            return False
        return self._load(directory, signature)

    def _load(self, directory: Path, signature: Signature) -> bool:
        self._held.discard(directory)
        texts: list[tuple[str, str]] = []
        unreadable: list[PolicyProblem] = []
        for name, *_ in signature:
            path = directory / name
            try:
                texts.append((str(path), path.read_bytes().decode("utf-8")))
            except UnicodeDecodeError as error:
                unreadable.append(
                    PolicyProblem(str(path), 1, "", "", f"not UTF-8 text ({error.reason} at byte {error.start})")
                )
            except OSError as error:  # gone between listing and reading: the next check sees it
                unreadable.append(PolicyProblem(str(path), 1, "", "", f"unreadable: {error.strerror or error}"))
        self.store.update(str(directory), tuple(texts), unreadable=unreadable)
        self._loaded[directory] = signature
        self._settling.pop(directory, None)
        return True

    def start(self) -> None:
        self._watch_writers()
        self.check_once(settle=False)
        self._thread = threading.Thread(target=self._run, name="policy-directories", daemon=True)
        self._thread.start()

    def _watch_writers(self) -> None:
        writers = Writers(self._woken)
        observer = Observer()
        try:
            for directory in self.directories:
                observer.schedule(writers, str(directory), recursive=False)
            observer.start()
        except OSError as error:  # no inotify here, or out of watches: settle instead
            log.warning("policy directories polled, not watched", extra={"fields": {"error": str(error)}})
            return
        self._writers, self._observer = writers, observer

    def _run(self) -> None:
        while not self._stop.is_set():
            self._woken.wait(self.interval)
            self._woken.clear()
            if self._stop.is_set():
                return
            try:
                self.check_once()
            except Exception as error:  # never: check_once catches per directory; kept as the last guard
                self.error = f"{type(error).__name__}: {error}"
                log.exception("policy directory check failed")
            with self._checks:
                self.checks += 1
                self._checks.notify_all()

    def wait_checks(self, count: int, timeout: float = 10.0) -> bool:
        """Wait until `count` more checks are done (tests: instead of sleeping an interval)."""
        with self._checks:
            target = self.checks + count
            return self._checks.wait_for(lambda: self.checks >= target, timeout)

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        self._woken.set()
        if self._observer is not None:
            self._observer.stop()
            if wait:
                self._observer.join(5)
        if wait and self._thread is not None:
            self._thread.join(5)
