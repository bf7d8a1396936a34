"""What the commands' parsers share: a subcommand with its description and exit codes, the input
options of `mutate` and `validate`, kubectl's cluster flags, and argument types."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from webhook.cli.inputs import DEFAULT_NAMESPACE

DEFAULT_POLICY_NAMESPACE = "gpu-admission"  # the webhook's namespace: its policy ConfigMaps and Leases


def command(commands: Any, name: str, summary: str, description: str, exits: str) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with its exit codes."""
    return commands.add_parser(  # type: ignore[no-any-return]
        name,
        help=summary,
        description=description,
        epilog=f"exit codes: {exits}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # `--fil` is a mistake to say, not a `--file` to guess
    )


def inputs(parser: argparse.ArgumentParser) -> None:
    """The documents to read, the policies to judge them with, and the cluster they meet."""
    parser.add_argument(
        "-f",
        "--file",
        action="append",
        required=True,
        help="a YAML or JSON file (many documents, v1 Lists), a directory of them, or - for stdin; repeatable",
    )
    parser.add_argument(
        "--policies", type=Path, action="append", help="a policy file or directory; repeatable (default: bundled)"
    )
    parser.add_argument(
        "--cluster-state",
        help="kubectl get pods,namespaces,nodes,resourcequotas -A -o yaml: existing pods counted against quotas, "
        "namespace labels, free GPU capacity",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        default=DEFAULT_NAMESPACE,
        help=f"namespace of documents that name none (default {DEFAULT_NAMESPACE}, as kubectl)",
    )


def cluster_options(parser: argparse.ArgumentParser) -> None:
    """kubectl's own flags, so `kubectl gpu-admission quota --context c` reads the cluster kubectl would."""
    parser.add_argument("--kubeconfig", help="the kubeconfig file (default: KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context (default: its current context)")
    parser.add_argument("--as", dest="as_user", metavar="USER", help="act as this user (kubectl's --as)")
    parser.add_argument("--as-group", action="append", default=[], metavar="GROUP", help="with --as: a group, once")


def policy_pair(text: str) -> tuple[str, str]:
    names = [name.strip() for name in text.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: give two policy names, e.g. team-a,slices-everywhere")
    return names[0], names[1]


def regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as error:
        raise argparse.ArgumentTypeError(f"not a regular expression: {error}") from None
    return text
