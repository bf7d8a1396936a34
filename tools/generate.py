"""Every derived file, from one command. `python -m tools.generate` writes them; `--check` writes
nothing and fails (exit 1) naming each file that differs from what it would write, which CI runs.

Derived here: both webhook configurations (tools/webhook_manifests.py); the krew manifest, whose
sha256 is the archive's (tools/krew.py; `python -m tools.krew` builds the archive into dist/);
the GPUPolicy schema and its field reference (tools/schema_files.py); the GPUPolicy CRD
(tools/gpupolicy_crd.py); the chart README's table of every value (tools/chart_readme.py); the
docs' figures from measured runs (tools/figures.py); the GPU and cloud-label tables of
docs/gpus.md (tools/doc_tables.py); one DRA DeviceClass per MIG profile (tools/mig_classes.py);
the ServiceMonitor and alerts (tools/monitoring.py); the example policies' rules as
ValidatingAdmissionPolicies (tools/native_examples.py); the files kustomize and Helm each need a copy
of in their own tree, and the docs site's home page made from the README (tools/copies.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from tools import (
    chart_readme,
    copies,
    doc_tables,
    figures,
    gpupolicy_crd,
    krew,
    mig_classes,
    monitoring,
    native_examples,
    schema_files,
    webhook_manifests,
)

ROOT = Path(__file__).resolve().parent.parent
GENERATORS: tuple[Callable[[], Mapping[Path, str | bytes]], ...] = (
    webhook_manifests.outputs,
    krew.outputs,
    schema_files.outputs,
    gpupolicy_crd.outputs,
    doc_tables.outputs,
    copies.outputs,
    mig_classes.outputs,
    monitoring.outputs,
    chart_readme.outputs,
    figures.outputs,
    native_examples.outputs,
)


def derived() -> dict[Path, str | bytes]:
    found: dict[Path, str | bytes] = {}
    for generator in GENERATORS:
        found.update(generator())
    return found


def _same(path: Path, content: str | bytes) -> bool:
    if not path.exists():
        return False
    return path.read_bytes() == (content if isinstance(content, bytes) else content.encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail if a derived file differs")
    args = parser.parse_args(argv)
    stale = [path for path, content in derived().items() if not _same(path, content)]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} differs from what python -m tools.generate writes", file=sys.stderr)
        return 1 if stale else 0
    for path, content in derived().items():
        if path in stale:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
