"""`gpu-admission mutate`: every document of the input as the mutating webhook leaves it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from policies import InputError, KnownCluster
from webhook.cli.inputs import read_inputs, without_lent_namespace
from webhook.cli.offline import EXIT_OK, cluster_state, load_engine
from webhook.cli.parsing import command, inputs


def register(commands: Any, root: argparse.ArgumentParser) -> None:
    """The command, its options and exit codes."""
    mutate = command(
        commands,
        "mutate",
        "what the mutating webhook would do",
        "Prints every document of FILE as the mutating webhook leaves it: Pods mutated, workloads (pod "
        "controllers, Kubeflow, Ray, LeaderWorkerSet, JobSet, Argo, KServe, Knative and WorkloadKind "
        "entries) with each pod template mutated as their pods will be, other documents, and what the shipped "
        "webhooks would never be sent (an excluded namespace, a pod or template no GPU condition matches), passed "
        "through unchanged (listed on stderr with the reason), so the output can go on to kubectl apply.",
        "0 done; 2 input or policies that cannot be read",
    )
    inputs(mutate)
    mutate.add_argument("-o", "--output", choices=("yaml", "json", "patch"), default="yaml", help="default yaml")
    mutate.set_defaults(run=run)


def _dump(objects: list[object], output: str) -> str:
    if output == "yaml":
        return yaml.safe_dump_all(objects, sort_keys=False)
    if len(objects) == 1:
        return json.dumps(objects[0], indent=2)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2)


def run(args: argparse.Namespace) -> int:
    engine = load_engine(args.policies)
    _, cluster = cluster_state(args.cluster_state) if args.cluster_state else ([], KnownCluster())
    inputs = read_inputs(args.file, engine, args.namespace, webhook="/mutate")
    outputs: list[object] = []
    patches: list[object] = []
    for label, document, judged in inputs.documents:
        if not judged or not isinstance(document, dict):
            outputs.append(document)  # passed through: the output can go on to kubectl apply
            patches.append([])  # -o patch: one line per document, in order
            continue
        try:
            result = engine.mutate_any(document, cluster=cluster)
        except InputError as error:
            raise error.in_document(label) from None
        for warning in result.warnings:
            print(f"Warning: {label}: {warning}", file=sys.stderr)
        outputs.append(without_lent_namespace(result.object) if label in inputs.lent else result.object)
        patches.append(list(result.patch) if document.get("kind") == "Pod" else _replacements(document, result.object))
    if args.output == "patch":
        print("\n".join(json.dumps(patch) for patch in patches))
    else:
        print(_dump(outputs, args.output), end="" if args.output == "yaml" else "\n")
    inputs.say_skipped()
    return EXIT_OK


def _replacements(before: dict[str, object], after: object) -> list[dict[str, object]]:
    """RFC 6902 for a workload: each top-level field the mutation changed, replaced whole."""
    if not isinstance(after, dict):
        return []
    return [{"op": "replace", "path": f"/{key}", "value": after[key]} for key in after if after[key] != before.get(key)]
