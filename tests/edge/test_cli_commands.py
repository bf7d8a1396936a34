"""One module per command (#43): each holds its options, its body and its exit codes; main.py only
parses and dispatches."""

from __future__ import annotations

import argparse
import inspect

from webhook.cli import main


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_command_comes_from_a_module_of_its_own_that_says_its_exit_codes():
    parser = main.build_parser()
    commands = subcommands(parser)
    assert list(commands) == [
        "mutate",
        "validate",
        "lint",
        "test",
        "quota",
        "audit",
        "native",
        "serve",
        "completion",
        "certs",
    ]
    for name, command in commands.items():
        leaves = subcommands(command).values() if name == "certs" else [command]
        for leaf in leaves:
            assert (leaf.epilog or "").startswith("exit codes: "), name
            run = leaf.get_default("run")
            assert run is not None and inspect.getmodule(run).__name__ != "webhook.cli.main", name


def test_main_holds_no_command_options():
    assert 'add_argument("-' not in inspect.getsource(main).replace("--version", "")
