"""Policies from directories (a mounted ConfigMap volume), reloaded when their files change.

Kubelet updates a mounted ConfigMap by swapping a `..data` symlink (its atomic writer: every file
of the new version is whole before the swap), so the check compares the resolved files'
identities, not directory mtimes, and a change made that way is loaded at once. In any other
directory, a change is loaded only once it has held still for a whole interval (same size, inode
and mtime at two checks in a row), so a file caught half-written is never loaded; written
elsewhere and renamed in, it is whole when seen, and held still one interval all the same (a
rename cannot be told from a new file being written). A file whose bytes are no UTF-8 is a
problem of that file.
Nothing stops the watcher: a check that fails is logged with its traceback and tried again at the
next interval, and `healthy` says whether the last check got through.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from policies import PolicyProblem
from webhook.sources.files import POLICY_SUFFIXES
from webhook.sources.store import PolicyStore

log = logging.getLogger("gpu_admission.directories")
Signature = tuple[tuple[str, int, int, int], ...]


def _atomically_written(directory: Path) -> bool:
    """Kubelet's ConfigMap and projected volumes: files reached through a `..data` symlink that
    is swapped whole."""
    return (directory / "..data").is_symlink()


class DirectoryWatcher:
    def __init__(self, directories: list[Path], store: PolicyStore, interval: float = 2.0) -> None:
        self.directories = directories
        self.store = store
        self.interval = interval
        self.name = "policy directories"
        self.error = ""  # why the last check failed; empty when it got through
        self._loaded: dict[Path, Signature] = {}
        self._settling: dict[Path, Signature] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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
        if signature == self._loaded.get(directory):
            self._settling.pop(directory, None)
            return False
        if settle and not _atomically_written(directory) and self._settling.get(directory) != signature:
            self._settling[directory] = signature  # changed since the last look: let it settle
            return False
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
        self.check_once(settle=False)
        self._thread = threading.Thread(target=self._run, name="policy-directories", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check_once()
            except Exception as error:  # never: check_once catches per directory; kept as the last guard
                self.error = f"{type(error).__name__}: {error}"
                log.exception("policy directory check failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
