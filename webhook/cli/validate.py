"""`gpu-admission validate`: mutation then validation of every document, as the API server would
run them."""

from __future__ import annotations

import argparse
from typing import Any

from webhook.cli.offline import cmd_validate, load_engine
from webhook.cli.parsing import command, inputs


def register(commands: Any, root: argparse.ArgumentParser) -> None:
    """The command, its options and exit codes."""
    validate = command(
        commands,
        "validate",
        "mutation then validation, as the API server would run them",
        "Judges what the shipped webhooks would be sent of FILE: Pods and workloads (each pod template, named by "
        "its path) after the mutation their pods will get, DRA claims and claim templates, ConfigMaps and "
        "Secrets, Namespaces labelled for admin access; anything else, and what those webhooks would never be "
        "sent (an excluded namespace, their matchConditions), is listed on stderr as skipped, with the reason. "
        "Pods of FILE admitted earlier count against quotas for later ones; claims and templates admitted "
        "earlier are known to the pods and workloads after them.",
        "0 all allowed; 1 something denied; 2 input or policies that cannot be read",
    )
    inputs(validate)
    validate.add_argument("-o", "--output", choices=("text", "json"), default="text", help="default text")
    validate.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return cmd_validate(args, load_engine(args.policies))
