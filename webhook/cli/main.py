"""`gpu-admission` and `kubectl gpu-admission`: the engine from the command line.

Exit codes: 0 fine, 1 denied or lint problems, 2 bad input or bad policy. Never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml

from policies.engine import Engine
from policies.errors import InputError
from policies.quantity import parse_quantity
from webhook.cli.offline import cmd_lint, cmd_validate
from webhook.sources.files import load_policies, read_manifests

EXIT_OK, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2


def _engine(policies: list[Path] | None) -> Engine:
    policy_set, result = load_policies(policies)
    for problem in result.problems:
        print(f"error: {problem}", file=sys.stderr)
    if result.problems:
        raise SystemExit(EXIT_BAD_INPUT)
    return Engine(policy_set, parse_quantity)


def _dump(objects: list[object], output: str) -> str:
    if output == "yaml":
        return yaml.safe_dump_all(objects, sort_keys=False)
    if len(objects) == 1:
        return json.dumps(objects[0], indent=2)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2)


def cmd_mutate(args: argparse.Namespace) -> int:
    engine = _engine(args.policies)
    outputs: list[object] = []
    for label, document in read_manifests(args.file):
        try:
            result = engine.mutate(document)
        except InputError as error:
            raise error.in_document(label) from None
        for warning in result.warnings:
            print(f"Warning: {warning}", file=sys.stderr)
        outputs.append(list(result.patch) if args.output == "patch" else result.object)
    if args.output == "patch":
        print("\n".join(json.dumps(patch) for patch in outputs))
    else:
        print(_dump(outputs, args.output), end="" if args.output == "yaml" else "\n")
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    return cmd_validate(args, _engine(args.policies))


def cmd_serve(args: argparse.Namespace) -> int:
    if (args.all_namespaces or args.manage_certs) and not args.watch_configmaps:
        flag = "--all-namespaces" if args.all_namespaces else "--manage-certs"
        raise InputError(flag, "needs --watch-configmaps NAMESPACE (the webhook's own namespace)")
    if args.workers != 1:
        raise InputError(
            "--workers",
            "gpu-admission runs one worker per replica (its view of the cluster is one "
            "process's); use --threads for concurrency and more replicas for more CPU",
        )
    if args.client_ca is not None and not args.client_ca.is_file():
        raise InputError("--client-ca", f"{args.client_ca}: no such file")
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
        manage_certs=args.manage_certs,
        service=args.service,
        cert_dir=args.cert_dir,
        client_ca=args.client_ca,
        threads=args.threads,
    )
    serve(config, args.bind)
    return EXIT_OK


def cmd_certs(args: argparse.Namespace) -> int:
    from certs.files import generate

    generate(args.out, args.service, args.namespace, args.dns_name or [], args.ip or [])
    print(f"wrote {args.out}/ca.crt, tls.crt, tls.key for {args.service}.{args.namespace}.svc")
    return EXIT_OK


def cmd_client_certs(args: argparse.Namespace) -> int:
    from certs.files import generate_client

    generate_client(args.out, args.name)
    print(f"wrote {args.out}/client-ca.crt (for serve --client-ca) and client.crt, client.key (CN {args.name})")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpu-admission", description="GPU admission webhook and policy engine")
    commands = parser.add_subparsers(dest="command", required=True)
    mutate = commands.add_parser("mutate", help="what the mutating webhook would do to Pods")
    mutate.add_argument("-f", "--file", required=True, help="YAML or JSON file, or - for stdin")
    mutate.add_argument("--policies", type=Path, action="append", help="policy directory (default: bundled)")
    mutate.add_argument("-o", "--output", choices=("yaml", "json", "patch"), default="yaml")
    mutate.set_defaults(run=cmd_mutate)
    validate = commands.add_parser("validate", help="mutation then validation of Pods and pod controllers")
    validate.add_argument("-f", "--file", required=True, help="YAML or JSON file, or - for stdin")
    validate.add_argument("--policies", type=Path, action="append", help="policy directory (default: bundled)")
    validate.add_argument("--cluster-state", help="v1 List of existing pods (kubectl get pods -A -o yaml)")
    validate.add_argument("-o", "--output", choices=("text", "json"), default="text")
    validate.set_defaults(run=_validate)
    lint = commands.add_parser("lint", help="check policy files: schema, CEL, profiles and models")
    lint.add_argument("paths", nargs="+", help="policy directories or files")
    lint.set_defaults(run=cmd_lint)
    serve = commands.add_parser("serve", help="the webhook over TLS (embedded default with no flags)")
    serve.add_argument("--policies", type=Path, action="append", help="policy directory (default: bundled)")
    serve.add_argument("--bind", default="127.0.0.1:8443", help="HOST:PORT (default 127.0.0.1:8443)")
    serve.add_argument(
        "--cert-dir",
        type=Path,
        default=Path(".gpu-admission/certs"),
        help="tls.crt, tls.key, ca.crt; dev certificates are made here on first start",
    )
    serve.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)  # only 1: said why otherwise
    serve.add_argument("--threads", type=int, default=32, help="requests served at once (default 32)")
    serve.add_argument(
        "--client-ca",
        type=Path,
        help="require a client certificate signed by this CA (the API server's, from an AdmissionConfiguration)",
    )
    serve.add_argument(
        "--read-timeout",
        type=float,
        default=5.0,
        help="seconds a client has to send a request's TLS handshake, headers and body (default 5)",
    )
    serve.add_argument("--fail-open", action="store_true", help="allow, not deny, when the engine fails on a review")
    serve.add_argument(
        "--watch-configmaps",
        metavar="NAMESPACE",
        help="connect to the cluster: policies from ConfigMaps labelled gpu-admission.io/policy=true in NAMESPACE "
        "(the webhook's own), pods, namespaces and nodes watched",
    )
    serve.add_argument(
        "--manage-certs",
        action="store_true",
        help="certificates made, stored in Secrets, injected into the webhook configurations and renewed in the "
        "cluster (one replica at a time, by a Lease); written to --cert-dir",
    )
    serve.add_argument("--service", default="gpu-admission", help="the webhook's Service, for --manage-certs")
    serve.add_argument(
        "--all-namespaces",
        action="store_true",
        help="also namespaced policies from labelled ConfigMaps in every namespace (each matches only its own)",
    )
    serve.set_defaults(run=cmd_serve)
    certs = commands.add_parser("certs", help="TLS material")
    certs_commands = certs.add_subparsers(dest="certs_command", required=True)
    generate = certs_commands.add_parser("generate", help="a CA and a serving certificate for the Service")
    generate.add_argument("--service", required=True)
    generate.add_argument("--namespace", required=True)
    generate.add_argument("--out", type=Path, required=True)
    generate.add_argument("--dns-name", action="append", help="an extra DNS SAN")
    generate.add_argument("--ip", action="append", help="an IP SAN")
    generate.set_defaults(run=cmd_certs)
    client = certs_commands.add_parser(
        "client", help="a client CA and a client certificate for the API server (serve --client-ca)"
    )
    client.add_argument("--out", type=Path, required=True)
    client.add_argument("--name", default="kube-apiserver", help="the certificate's common name")
    client.set_defaults(run=cmd_client_certs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (OSError, UnicodeDecodeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as stop:
        return int(stop.code or 0)
    except BrokenPipeError:
        return EXIT_OK
    return code


if __name__ == "__main__":
    sys.exit(main())
