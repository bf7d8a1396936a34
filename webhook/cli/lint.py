"""`gpu-admission lint`: policy files checked, each problem with file, line, policy and field."""

from __future__ import annotations

import argparse
from typing import Any

from webhook.cli.offline import cmd_lint
from webhook.cli.parsing import command, policy_pair


def register(commands: Any, root: argparse.ArgumentParser) -> None:
    """The command, its options and exit codes (its body: webhook.cli.offline.cmd_lint)."""
    lint = command(
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
        help="a cluster's DeviceClasses, Nodes and ResourceSlices (kubectl get deviceclasses,nodes,resourceslices "
        "-o yaml): warns of two classes serving one extended resource name, and of nodes whose GPUs both the "
        "device plugin and the DRA driver advertise",
    )
    lint.add_argument(
        "--allow-overlap",
        action="append",
        type=policy_pair,
        metavar="POLICY,POLICY",
        help="two policies meant to decide the same pods differently (each setup of its own): not a warning; "
        "repeatable",
    )
    lint.set_defaults(run=cmd_lint)
