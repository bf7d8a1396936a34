"""Policies from directories (a mounted ConfigMap volume), reloaded when their files change.

Kubelet updates a mounted ConfigMap by swapping a `..data` symlink, so the check compares the
resolved files' identities, not directory mtimes.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from webhook.sources.files import directory_texts
from webhook.sources.store import PolicyStore

log = logging.getLogger("gpu_admission.directories")


class DirectoryWatcher:
    def __init__(self, directories: list[Path], store: PolicyStore, interval: float = 2.0) -> None:
        self.directories = directories
        self.store = store
        self.interval = interval
        self._seen: dict[Path, tuple[tuple[str, int, int, int], ...]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _signature(self, directory: Path) -> tuple[tuple[str, int, int, int], ...]:
        found = []
        for path in sorted(directory.iterdir()):
            if path.name.startswith(".") or not path.is_file():
                continue
            stat = path.stat()  # follows the ..data symlink
            found.append((path.name, stat.st_ino, stat.st_mtime_ns, stat.st_size))
        return tuple(found)

    def check_once(self) -> bool:
        """Load every directory whose files changed since the last check; True if any did."""
        changed = False
        for directory in self.directories:
            try:
                signature = self._signature(directory)
                if signature == self._seen.get(directory):
                    continue
                texts = tuple(directory_texts(directory))
            except OSError as error:
                log.warning(
                    "policy directory unreadable, keeping what is loaded",
                    extra={"fields": {"directory": str(directory), "error": str(error)}},
                )
                continue
            self._seen[directory] = signature
            self.store.update(f"{directory}", texts)
            changed = True
        return changed

    def start(self) -> None:
        self.check_once()
        self._thread = threading.Thread(target=self._run, name="policy-directories", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check_once()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
