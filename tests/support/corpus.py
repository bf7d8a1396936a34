"""The public GPU manifests of tests/corpus (sources in its SOURCES.md) and the example policy
sets they are judged under, each in the namespace it is written for."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from policies.engine import Engine
from policies.judge.controllers import pod_templates
from policies.model.workload_kinds import BUILT_IN_TABLE
from policies.review.cluster import KnownCluster
from webhook.sources.policy_files import load_policies

CORPUS = Path(__file__).parents[1] / "corpus"
EXAMPLES = Path(__file__).parents[2] / "examples" / "policies"
# policy set: (file under examples/policies, or None for the bundled default; namespace judged in)
SETS = {
    "bundled": (None, "ml"),
    "slices-everywhere": ("slices-everywhere.yaml", "ml"),
    "training": ("training-quota.yaml", "team-a"),
    "dev": ("dev-no-whole-gpus.yaml", "dev-alice"),
    "inference": ("inference-triton.yaml", "serving"),
}
CLUSTER = KnownCluster({"serving": {"gpu-admission.io/workload": "inference"}, "ml": {}, "team-a": {}, "dev-alice": {}})


def manifests() -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(file stem, index in the file, document) for every document of the corpus."""
    for path in sorted(CORPUS.glob("*.yaml")):
        for index, document in enumerate(yaml.safe_load_all(path.read_text())):
            if document:
                yield path.stem, index, document


def engine_for(name: str) -> Engine:
    """The engine of the policy set `name` (a key of SETS)."""
    file, _ = SETS[name]
    policy_set, result = load_policies([EXAMPLES / file] if file else None)
    assert not result.problems
    return Engine(policy_set)


def placed(document: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A copy of `document` in `namespace`."""
    document = copy.deepcopy(document)
    document.setdefault("metadata", {})["namespace"] = namespace
    return document


def corpus_pods() -> list[dict[str, Any]]:
    """The pods the corpus's workloads make (their templates, as v1 Pods), named by their file."""
    pods = []
    for stem, _, document in manifests():
        if BUILT_IN_TABLE.find(document.get("apiVersion"), document.get("kind")) is None:
            continue
        for index, template in enumerate(pod_templates(document, "corpus", BUILT_IN_TABLE)):
            pod = json.loads(json.dumps(template.pod))
            metadata = pod.get("metadata", {})
            pod["metadata"] = {key: value for key, value in metadata.items() if key in ("labels", "annotations")}
            pod["metadata"]["name"] = f"{stem[:40]}-{index}"
            pods.append(pod)
    return pods
