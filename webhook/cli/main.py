"""`gpu-admission` and `kubectl gpu-admission`: the engine from the command line.

Exit codes: 0 fine, 1 denied or lint problems, 2 bad input or bad policy. Never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from policies import InputError
from webhook.cli import audit, certs, completion, lint, mutate, native, policytest, quota_command, serve, validate
from webhook.cli.offline import EXIT_BAD_INPUT, EXIT_OK

# In the order --help lists them; each module holds its command's options, body and exit codes.
COMMANDS = (mutate, validate, lint, policytest, quota_command, audit, native, serve, completion, certs)


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_program(),
        description="GPU admission webhook and policy engine. Every command says its exit codes in its --help.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"gpu-admission {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for each in COMMANDS:
        each.register(commands, parser)
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
