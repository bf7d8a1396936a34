"""Manifests as people have them: files, directories and `-`, many documents each, v1 Lists
opened, Helm and kustomize output included. Each document is judged if the shipped webhooks
would be sent it and the engine judges its kind (a Pod, a workload whose pod templates it knows,
a DRA claim or template, a ConfigMap or Secret, a labelled Namespace); any other is passed
through and listed as skipped, with the reason (policies.native.webhook_scope says what the
cluster sends: the same description the webhook configurations are rendered from).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from policies import Engine, InputError, why_not_sent
from webhook.sources.policy_files import POLICY_SUFFIXES, read_manifests

DEFAULT_NAMESPACE = "default"  # where kubectl puts an object that names none
NOT_JUDGED = "not a kind gpu-admission judges"
# Who the conditions see asking: a user, not a kubelet (whose mirror pods are skipped).
CLI_USER = {"username": "gpu-admission-cli", "groups": ["system:authenticated"]}


@dataclass
class Inputs:
    """The documents of every input, in order: (label, object, judged)."""

    documents: list[tuple[str, object, bool]] = field(default_factory=list)
    lent: set[str] = field(default_factory=set)  # labels of documents judged in a namespace they did not name
    why_skipped: dict[str, str] = field(default_factory=dict)  # label: why it is not judged

    @property
    def judged(self) -> list[tuple[str, dict[str, object]]]:
        return [(label, doc) for label, doc, judged in self.documents if judged and isinstance(doc, dict)]

    @property
    def skipped(self) -> list[str]:
        return [label for label, _, judged in self.documents if not judged]

    def say_skipped(self) -> None:
        """On stderr, by reason: what the cluster would never send, and kinds not judged."""
        by_reason: dict[str, list[str]] = {}
        for label in self.skipped:
            by_reason.setdefault(self.why_skipped.get(label, NOT_JUDGED), []).append(label)
        for reason, labels in by_reason.items():
            listed = "; ".join(labels[:10]) + ("; ..." if len(labels) > 10 else "")
            print(f"skipped {len(labels)} ({reason}): {listed}", file=sys.stderr)


def files_of(name: str) -> list[str]:
    """A file, `-`, or every manifest file under a directory (sorted, recursively)."""
    if name == "-":
        return ["-"]
    path = Path(name)
    if path.is_dir():
        return [str(p) for p in sorted(path.rglob("*")) if p.suffix in POLICY_SUFFIXES and p.is_file()]
    return [name]


def read_inputs(names: list[str], engine: Engine, namespace: str, webhook: str | None = None) -> Inputs:
    """Every document of `names`; one without a namespace gets `namespace`, as kubectl gives it.
    `webhook` (/mutate or /validate): judge only what the shipped webhooks of that path would be
    sent; None, whatever the engine judges (a policy test's resources)."""
    inputs = Inputs()
    for name in names:
        for file in files_of(name):
            for label, document in read_manifests(file):
                judged = isinstance(document, dict) and engine.judges(document.get("apiVersion"), document.get("kind"))
                if judged and isinstance(document, dict):
                    placed = with_namespace(document, namespace)
                    where, table = _namespace_of(placed), engine.policy_set.workloads
                    why = why_not_sent(webhook, placed, where, CLI_USER, table) if webhook else None
                    if why is not None:
                        inputs.why_skipped[label] = why
                        judged = False
                    elif placed is not document:
                        inputs.lent.add(label)
                    document = placed if judged else document
                inputs.documents.append((label, document, judged))
    if not inputs.documents:
        # An empty file or a directory of no manifests passing in silence is a CI false green.
        raise InputError("-f", f"no documents in {', '.join(names)}")
    return inputs


def _namespace_of(document: dict[str, object]) -> str:
    """Where the API server would place it: its namespace, or for a Namespace its own name."""
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return ""
    key = "name" if document.get("kind") == "Namespace" else "namespace"
    found = metadata.get(key)
    return found if isinstance(found, str) else ""


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
