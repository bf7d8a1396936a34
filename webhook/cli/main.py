"""`gpu-admission` and `kubectl gpu-admission`: the engine from the command line.

Exit codes: 0 fine, 1 denied or lint problems, 2 bad input or bad policy. Never a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from policies import InputError
from webhook.cli.audit import EVENTS_PER_RUN, cmd_audit
from webhook.cli.commands import cmd_certs, cmd_client_certs, cmd_mutate, cmd_serve, cmd_validate_inputs
from webhook.cli.inputs import DEFAULT_NAMESPACE
from webhook.cli.offline import EXIT_BAD_INPUT, EXIT_OK, cmd_lint
from webhook.cli.policytest import cmd_test
from webhook.cli.quota import DEFAULT_POLICY_NAMESPACE, cmd_quota


def _cluster_options(parser: argparse.ArgumentParser) -> None:
    """kubectl's own flags, so `kubectl gpu-admission quota --context c` reads the cluster kubectl would."""
    parser.add_argument("--kubeconfig", help="the kubeconfig file (default: KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context (default: its current context)")
    parser.add_argument("--as", dest="as_user", metavar="USER", help="act as this user (kubectl's --as)")
    parser.add_argument("--as-group", action="append", default=[], metavar="GROUP", help="with --as: a group, once")


def _print_completion(parser: argparse.ArgumentParser, shell: str) -> int:
    from webhook.cli.completion import script

    print(script(parser, shell), end="")
    return 0


def _policy_pair(text: str) -> tuple[str, str]:
    names = [name.strip() for name in text.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: give two policy names, e.g. team-a,slices-everywhere")
    return names[0], names[1]


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as error:
        raise argparse.ArgumentTypeError(f"not a regular expression: {error}") from None
    return text


def _program() -> str:
    """How the user called it: `kubectl gpu-admission` when kubectl ran it as its plugin."""
    return "kubectl gpu-admission" if Path(sys.argv[0]).name.startswith("kubectl-") else "gpu-admission"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from policies import COMPILED

    engine = "engine compiled by mypyc" if COMPILED else "engine from Python source"
    try:
        return f"{version('gpu-admission')} ({engine})"
    except PackageNotFoundError:
        return f"unknown (not installed; {engine})"


def _command(commands: Any, name: str, summary: str, description: str, exits: str) -> argparse.ArgumentParser:
    return commands.add_parser(  # type: ignore[no-any-return]
        name,
        help=summary,
        description=description,
        epilog=f"exit codes: {exits}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # `--fil` is a mistake to say, not a `--file` to guess
    )


def _inputs(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "-f",
        "--file",
        action="append",
        required=True,
        help="a YAML or JSON file (many documents, v1 Lists), a directory of them, or - for stdin; repeatable",
    )
    command.add_argument(
        "--policies", type=Path, action="append", help="a policy file or directory; repeatable (default: bundled)"
    )
    command.add_argument(
        "--cluster-state",
        help="kubectl get pods,namespaces,nodes,resourcequotas -A -o yaml: existing pods counted against quotas, "
        "namespace labels, free GPU capacity",
    )
    command.add_argument(
        "-n",
        "--namespace",
        default=DEFAULT_NAMESPACE,
        help=f"namespace of documents that name none (default {DEFAULT_NAMESPACE}, as kubectl)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_program(),
        description="GPU admission webhook and policy engine. Every command says its exit codes in its --help.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"gpu-admission {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    mutate = _command(
        commands,
        "mutate",
        "what the mutating webhook would do",
        "Prints every document of FILE as the mutating webhook leaves it: Pods mutated, workloads (pod "
        "controllers, Kubeflow, Ray, LeaderWorkerSet, JobSet, Argo, KServe, Knative and WorkloadKind "
        "entries) with each pod template mutated as their pods will be, other documents passed through "
        "unchanged (listed on stderr), so the output can go on to kubectl apply.",
        "0 done; 2 input or policies that cannot be read",
    )
    _inputs(mutate)
    mutate.add_argument("-o", "--output", choices=("yaml", "json", "patch"), default="yaml", help="default yaml")
    mutate.set_defaults(run=cmd_mutate)
    validate = _command(
        commands,
        "validate",
        "mutation then validation, as the API server would run them",
        "Judges every Pod and workload of FILE (each pod template, named by its path) after the mutation "
        "its pods will get; documents of other kinds are listed on stderr and skipped. Pods of FILE admitted "
        "earlier count against quotas for later ones.",
        "0 all allowed; 1 something denied; 2 input or policies that cannot be read",
    )
    _inputs(validate)
    validate.add_argument("-o", "--output", choices=("text", "json"), default="text", help="default text")
    validate.set_defaults(run=cmd_validate_inputs)
    lint = _command(
        commands,
        "lint",
        "check policy files",
        "Checks policy files and directories: schema, CEL (and unguarded map indexing), profiles and "
        "models, rules that can never be true or false, policies that decide the same pods differently; "
        "each problem with file, line, policy and field path.",
        "0 no problems (warnings aside, unless --strict); 1 problems, warnings with --strict, or no policy file "
        "found; 2 a path that cannot be read or a bad flag",
    )
    lint.add_argument("paths", nargs="+", help="policy files or directories")
    lint.add_argument("--strict", action="store_true", help="warnings fail too (exit 1), as for CI")
    lint.add_argument("-o", "--output", choices=("text", "json"), default="text", help="default text")
    lint.add_argument(
        "--cluster-state",
        metavar="FILE",
        help="a cluster's DeviceClasses (kubectl get deviceclasses -o yaml): warns of two serving one extended "
        "resource name",
    )
    lint.add_argument(
        "--allow-overlap",
        action="append",
        type=_policy_pair,
        metavar="POLICY,POLICY",
        help="two policies meant to decide the same pods differently (each setup of its own): not a warning; "
        "repeatable",
    )
    lint.set_defaults(run=cmd_lint)
    test = _command(
        commands,
        "test",
        "run policy tests (kind: Test files)",
        "Runs every `kind: Test` document under DIR: its policies judge its resources (with its cluster "
        "state) and each expected result (allowed, denied or warned, by which policy and rule, patched "
        "fields) is checked. The format is in webhook/cli/policytest.py and the README.",
        "0 every result holds; 1 a result does not; 2 a test, policy or resource that cannot be read",
    )
    test.add_argument("paths", nargs="+", metavar="DIR", help="directories (or files) holding Test documents")
    test.add_argument("-o", "--output", choices=("text", "json", "junit"), default="text", help="default text")
    test.add_argument(
        "--run",
        dest="selected",
        metavar="REGEX",
        type=_regex,
        help="only the results whose test or resource name this finds",
    )
    test.set_defaults(run=cmd_test)
    quota = _command(
        commands,
        "quota",
        "what is used, reserved and left of each GPU quota",
        "Per policy and scope: each limit with what is used (pods counted), reserved (admissions under "
        "strict quotas not yet seen as pods), left, and a bar; per-pod caps too. From --cluster-state, "
        "else the live cluster through the kubeconfig (read-only: pods, namespaces, the policy ConfigMaps "
        "and strict-quota Leases in --policy-namespace; what the kubeconfig may not read is said and left out).",
        "0 shown; 2 input or policies that cannot be read",
    )
    quota.add_argument("-n", "--namespace", help="one namespace (default: every scope holding something)")
    quota.add_argument("--cluster-state", help="kubectl get pods,namespaces,nodes,resourcequotas -A -o yaml")
    quota.add_argument(
        "--policies",
        type=Path,
        action="append",
        help="policy files or directories (default: the cluster's, else bundled)",
    )
    quota.add_argument("--policy-namespace", default=DEFAULT_POLICY_NAMESPACE, help="the webhook's namespace")
    quota.add_argument("-o", "--output", choices=("text", "json"), default="text", help="default text")
    _cluster_options(quota)
    quota.set_defaults(run=cmd_quota)
    audit = _command(
        commands,
        "audit",
        "judge existing GPU pods as the background audit does",
        "Judges the GPU pods of --cluster-state (or of the cluster, --live) against the policies now: rules "
        "and per-pod caps, budgets now over their limits, requests their node no longer offers (re-split "
        "into other MIG profiles). -o policyreport prints wgpolicyk8s.io/v1alpha2 PolicyReports.",
        "0 no violation (warnings aside); 1 violations; 2 input or policies that cannot be read",
    )
    audit.add_argument("--cluster-state", help="kubectl get pods,namespaces,nodes,resourcequotas -A -o yaml")
    audit.add_argument(
        "--policies",
        type=Path,
        action="append",
        help="policy files or directories (default: with --live the cluster's policy ConfigMaps, else bundled)",
    )
    audit.add_argument(
        "--policy-namespace", default=DEFAULT_POLICY_NAMESPACE, help="with --live: the webhook's namespace"
    )
    audit.add_argument(
        "--live", action="store_true", help="read the cluster (--kubeconfig/--context, in-cluster config, KUBECONFIG)"
    )
    _cluster_options(audit)
    audit.add_argument(
        "--env-sources",
        action="store_true",
        help="judge ConfigMaps and Secrets too (what envFrom would hand over as NVIDIA's device variables); "
        "with --live, those the caller may list",
    )
    audit.add_argument("--write-reports", action="store_true", help="with --live: write PolicyReports and Events")
    audit.add_argument("--events", type=int, default=EVENTS_PER_RUN, help="Events at most a run (default 20)")
    audit.add_argument("--policy-snapshot", help=argparse.SUPPRESS)  # the leader's policies, for its audit process
    audit.add_argument(
        "-o", "--output", choices=("text", "json", "policyreport", "summary"), default="text", help="default text"
    )
    audit.set_defaults(run=cmd_audit)
    serve = _command(
        commands,
        "serve",
        "the webhook over TLS (embedded default with no flags)",
        "Serves POST /mutate and /validate (AdmissionReview v1), /healthz, /readyz and /metrics over TLS.",
        "0 stopped (SIGTERM); 2 a flag, the environment or --policies that cannot be used",
    )
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
        "--serving-name",
        action="append",
        default=[],
        metavar="NAME",
        help="with --manage-certs, one more DNS name or IP address the serving certificate carries: the host of a "
        "webhook reached by clientConfig.url (repeatable)",
    )
    serve.add_argument(
        "--metrics-bind",
        metavar="HOST:PORT",
        default=None,
        help="serve /metrics over plain HTTP on a port of its own (the webhook's port then answers it 404); "
        "default: /metrics on the webhook's port",
    )
    serve.add_argument(
        "--all-namespaces",
        action="store_true",
        help="also namespaced policies from labelled ConfigMaps in every namespace (each matches only its own)",
    )
    serve.add_argument(
        "--labelled-namespaces",
        action="store_true",
        help="also namespaced policies, read only in namespaces labelled gpu-admission.io/policies=enabled (each "
        "with a RoleBinding letting the webhook read its ConfigMaps): least privilege",
    )
    serve.set_defaults(run=cmd_serve)
    completion = _command(
        commands,
        "completion",
        "a shell completion script",
        'Prints a completion script for bash or zsh: eval "$(gpu-admission completion bash)" in ~/.bashrc.',
        "0 printed",
    )
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(run=lambda args: _print_completion(parser, args.shell))
    certs = commands.add_parser(
        "certs", help="TLS material", description="TLS material: generate or client.", allow_abbrev=False
    )
    certs_commands = certs.add_subparsers(dest="certs_command", required=True, metavar="{generate,client}")
    generate = _command(
        certs_commands,
        "generate",
        "a CA and a serving certificate for the Service",
        "Writes ca.crt, ca.key, tls.crt and tls.key to --out (keys 0600); refuses to replace a CA already there "
        "unless --force (every webhook configuration trusting the old one would break).",
        "0 written; 2 --out holds a CA already, or cannot be written",
    )
    generate.add_argument("--force", action="store_true", help="replace a CA already in --out")
    generate.add_argument("--service", required=True)
    generate.add_argument("--namespace", required=True)
    generate.add_argument("--out", type=Path, required=True)
    generate.add_argument("--dns-name", action="append", help="an extra DNS SAN")
    generate.add_argument("--ip", action="append", help="an IP SAN")
    generate.set_defaults(run=cmd_certs)
    client = _command(
        certs_commands,
        "client",
        "a client CA and a client certificate for the API server (serve --client-ca)",
        "Writes client-ca.crt (for serve --client-ca), client.crt and client.key to --out.",
        "0 written; 2 --out cannot be written",
    )
    client.add_argument("--out", type=Path, required=True)
    client.add_argument("--name", default="kube-apiserver", help="the certificate's common name")
    client.set_defaults(run=cmd_client_certs)
    return parser


def _os_error(error: OSError) -> str:
    """`/x.yaml: no such file or directory`, not `[Errno 2] No such file or directory: '/x.yaml'`."""
    if error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror[0].lower()}{error.strerror[1:]}"
    return str(error)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "write_reports", False) and not getattr(args, "live", False):
            parser.error("--write-reports needs --live (reports are written to the cluster the audit reads)")
    except SystemExit as stop:  # --help, --version, a usage error: argparse's code, from main as from the shell
        return int(stop.code or 0)
    try:
        code: int = args.run(args)
        sys.stdout.flush()  # here, not at exit: a reader that went away (| head) is not an error
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to say to it
        return EXIT_OK
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:
        print(f"error: {_os_error(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UnicodeDecodeError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as stop:
        return int(stop.code or 0)
    return code


if __name__ == "__main__":
    sys.exit(main())
