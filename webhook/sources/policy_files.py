"""Files in, plain data out: policy directories, the bundled default, input manifests."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path

import yaml

from policies import (
    BUILT_IN_TABLE,
    GPUPolicy,
    InputError,
    LoadResult,
    PolicyProblem,
    PolicySet,
    WorkloadKind,
    load_texts,
    read_data,
)

POLICY_SUFFIXES = (".yaml", ".yml", ".json")


def bundled_texts() -> list[tuple[str, str]]:
    folder = resources.files("policies.bundled")
    return sorted(
        (f"bundled/{entry.name}", entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(POLICY_SUFFIXES)
    )


def directory_texts(directory: Path) -> list[tuple[str, str]]:
    """Policy files of a directory, skipping the ..data symlink farm of mounted ConfigMaps."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: not a directory")
    return [
        (str(path), path.read_text(encoding="utf-8"))
        for path in sorted(directory.iterdir())
        if path.suffix in POLICY_SUFFIXES and not path.name.startswith(".") and path.is_file()
    ]


def policy_texts(path: Path) -> list[tuple[str, str]]:
    """A policy file, or the policy files of a directory."""
    if path.is_dir():
        return directory_texts(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such policy file or directory")
    return [(str(path), path.read_text(encoding="utf-8"))]


def load_policies(paths: list[Path] | None, generation: int = 1) -> tuple[PolicySet, LoadResult]:
    """Policies of files and directories; the bundled default when none is given."""
    texts: list[tuple[str, str]] = []
    if paths:
        for path in paths:
            texts.extend(policy_texts(path))
    else:
        texts = bundled_texts()
    result = load_texts(texts)
    return PolicySet(result.policies, generation, workloads=BUILT_IN_TABLE.with_kinds(result.workloads)), result


def policy_set_of(texts: Iterable[tuple[str, str, str | None]]) -> tuple[PolicySet, tuple[PolicyProblem, ...]]:
    """The policies of (file, text, namespace) entries (namespace: that of a ConfigMap outside the
    webhook's, None for cluster-wide ones), with every problem: a replica's versions in force
    handed to its audit process, a cluster's policy ConfigMaps read by `quota`."""
    policies: list[GPUPolicy] = []
    workloads: list[WorkloadKind] = []
    problems: list[PolicyProblem] = []
    by_namespace: dict[str | None, list[tuple[str, str]]] = {}
    for file, text, namespace in texts:
        by_namespace.setdefault(namespace, []).append((file, text))
    for namespace, files in by_namespace.items():
        loaded = load_texts(files, namespace=namespace)
        policies.extend(loaded.policies)
        workloads.extend(loaded.workloads)
        problems.extend(loaded.problems)
    table = BUILT_IN_TABLE.with_kinds(tuple(workloads))
    return PolicySet(tuple(policies), workloads=table), tuple(problems)


def read_manifests(name: str) -> Iterator[tuple[str, object]]:
    """(label, object) for each document of a file or '-'; v1 Lists are opened."""
    text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    try:
        documents = read_data(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise InputError("", f"not valid YAML or JSON{where}: {getattr(error, 'problem', error)}", name) from None
    for i, document in enumerate(documents, 1):
        if isinstance(document, dict) and document.get("kind") == "List" and isinstance(document.get("items"), list):
            for j, item in enumerate(document["items"], 1):
                yield _label(name, f"{i}.{j}", item), item
        else:
            yield _label(name, str(i), document), document


def _label(file: str, number: str, document: object) -> str:
    if isinstance(document, dict):
        metadata = document.get("metadata")
        if not isinstance(metadata, dict):
            metadata = {}
        return f"{file} document {number} ({document.get('kind')} {metadata.get('name', '')})".replace(" )", ")")
    return f"{file} document {number}"
