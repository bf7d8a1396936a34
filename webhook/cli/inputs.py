"""Manifests as people have them: files, directories and `-`, many documents each, v1 Lists
opened, Helm and kustomize output included. Each document is judged if the engine judges its
kind (a Pod, a workload whose pod templates it knows) and passed through otherwise, listed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from policies import Engine, InputError
from webhook.sources.files import POLICY_SUFFIXES, read_manifests

DEFAULT_NAMESPACE = "default"  # where kubectl puts an object that names none


@dataclass
class Inputs:
    """The documents of every input, in order: (label, object, judged)."""

    documents: list[tuple[str, object, bool]] = field(default_factory=list)
    lent: set[str] = field(default_factory=set)  # labels of documents judged in a namespace they did not name

    @property
    def judged(self) -> list[tuple[str, dict[str, object]]]:
        return [(label, doc) for label, doc, judged in self.documents if judged and isinstance(doc, dict)]

    @property
    def skipped(self) -> list[str]:
        return [label for label, _, judged in self.documents if not judged]

    def say_skipped(self) -> None:
        if self.skipped:
            listed = "; ".join(self.skipped[:10]) + ("; ..." if len(self.skipped) > 10 else "")
            print(f"skipped {len(self.skipped)} (not a Pod or a known workload): {listed}", file=sys.stderr)


def files_of(name: str) -> list[str]:
    """A file, `-`, or every manifest file under a directory (sorted, recursively)."""
    if name == "-":
        return ["-"]
    path = Path(name)
    if path.is_dir():
        return [str(p) for p in sorted(path.rglob("*")) if p.suffix in POLICY_SUFFIXES and p.is_file()]
    return [name]


def read_inputs(names: list[str], engine: Engine, namespace: str) -> Inputs:
    """Every document of `names`; one without a namespace gets `namespace`, as kubectl gives it."""
    inputs = Inputs()
    for name in names:
        for file in files_of(name):
            for label, document in read_manifests(file):
                judged = isinstance(document, dict) and engine.judges(document.get("apiVersion"), document.get("kind"))
                if judged and isinstance(document, dict):
                    placed = with_namespace(document, namespace)
                    if placed is not document:
                        inputs.lent.add(label)
                    document = placed
                inputs.documents.append((label, document, judged))
    if not inputs.documents:
        # An empty file or a directory of no manifests passing in silence is a CI false green.
        raise InputError("-f", f"no documents in {', '.join(names)}")
    return inputs


def with_namespace(document: dict[str, object], namespace: str) -> dict[str, object]:
    metadata = document.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return document  # malformed: the engine says so
    if metadata and metadata.get("namespace"):
        return document
    return {**document, "metadata": {**(metadata or {}), "namespace": namespace}}


def without_lent_namespace(document: object) -> object:
    """A mutated document as it came, namespace-less: `kubectl apply -n` still decides where it goes."""
    if not isinstance(document, dict) or not isinstance(document.get("metadata"), dict):
        return document
    metadata = {k: v for k, v in document["metadata"].items() if k != "namespace"}
    return {**document, "metadata": metadata}
