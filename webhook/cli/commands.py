"""The bodies of `mutate`, `serve` and `certs` (main.py holds the parser and the dispatch; the
other commands have modules of their own)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

from policies import Engine, InputError, KnownCluster
from webhook.cli.inputs import read_inputs, without_lent_namespace
from webhook.cli.offline import EXIT_BAD_INPUT, EXIT_OK, cluster_state, cmd_validate
from webhook.sources.files import load_policies


def _engine(policies: list[Path] | None) -> Engine:
    policy_set, result = load_policies(policies)
    for problem in result.problems:
        print(f"error: {problem}", file=sys.stderr)
    if result.problems:
        raise SystemExit(EXIT_BAD_INPUT)
    return Engine(policy_set)


def _dump(objects: list[object], output: str) -> str:
    if output == "yaml":
        return yaml.safe_dump_all(objects, sort_keys=False)
    if len(objects) == 1:
        return json.dumps(objects[0], indent=2)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2)


def cmd_mutate(args: argparse.Namespace) -> int:
    engine = _engine(args.policies)
    _, cluster = cluster_state(args.cluster_state) if args.cluster_state else ([], KnownCluster())
    inputs = read_inputs(args.file, engine, args.namespace)
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


def cmd_validate_inputs(args: argparse.Namespace) -> int:
    return cmd_validate(args, _engine(args.policies))


def cmd_serve(args: argparse.Namespace) -> int:
    needing = {
        "--all-namespaces": args.all_namespaces,
        "--labelled-namespaces": args.labelled_namespaces,
        "--manage-certs": args.manage_certs,
    }
    if any(needing.values()) and not args.watch_configmaps:
        flag = next(name for name, given in needing.items() if given)
        raise InputError(flag, "needs --watch-configmaps NAMESPACE (the webhook's own namespace)")
    if args.workers != 1:
        raise InputError(
            "--workers",
            "gpu-admission runs one worker per replica (its view of the cluster is one "
            "process's); use --threads for concurrency and more replicas for more CPU",
        )
    if args.client_ca is not None and not args.client_ca.is_file():
        raise InputError("--client-ca", f"{args.client_ca}: no such file")
    if args.metrics_bind is not None:
        from webhook.environment import host_port

        try:
            host_port(args.metrics_bind)
        except ValueError as error:
            raise InputError("--metrics-bind", str(error)) from None
    for directory in args.policies or ():
        if not directory.exists():  # a typo would otherwise serve nothing, unready for ever
            raise InputError("--policies", f"{directory}: no such file or directory")

    from webhook.environment import require_valid_environment

    require_valid_environment(os.environ)
    # The arguments hold: now the process's environment. The master's and the worker's metrics add
    # up only if prometheus_client sees this before its first import.
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gpu-admission-metrics-"))
    os.environ["GPU_ADMISSION_READ_TIMEOUT"] = str(args.read_timeout)
    from webhook.replica import ServerConfig, serve

    config = ServerConfig(
        policy_dirs=tuple(args.policies or ()),
        fail_open=args.fail_open,
        watch_namespace=args.watch_configmaps or "",
        all_namespaces=args.all_namespaces,
        labelled_namespaces=args.labelled_namespaces,
        manage_certs=args.manage_certs,
        service=args.service,
        serving_names=tuple(args.serving_name),
        cert_dir=args.cert_dir,
        client_ca=args.client_ca,
        threads=args.threads,
        metrics_bind=args.metrics_bind or os.environ.get("GPU_ADMISSION_METRICS_BIND", ""),
    )
    serve(config, args.bind)
    return EXIT_OK


def _key_directory(out: Path) -> None:
    """Private keys never go where packaging or an image build would pick them up."""
    resolved = out.resolve()
    for directory in (resolved, *resolved.parents):
        if (directory / "__init__.py").is_file():
            raise InputError(
                "--out",
                f"{directory} is a Python package, so private keys there would ship with it; "
                "use a directory of their own (e.g. .gpu-admission/certs)",
            )


def cmd_certs(args: argparse.Namespace) -> int:
    from certs.files import generate

    _key_directory(args.out)
    if (args.out / "ca.key").exists() and not args.force:
        raise InputError("--out", f"{args.out} holds a CA already (ca.key): give --force to replace it")
    generate(args.out, args.service, args.namespace, args.dns_name or [], args.ip or [])
    print(f"wrote {args.out}/ca.crt, tls.crt, tls.key for {args.service}.{args.namespace}.svc")
    return EXIT_OK


def cmd_client_certs(args: argparse.Namespace) -> int:
    from certs.files import generate_client

    _key_directory(args.out)
    generate_client(args.out, args.name)
    print(f"wrote {args.out}/client-ca.crt (for serve --client-ca) and client.crt, client.key (CN {args.name})")
    return EXIT_OK
