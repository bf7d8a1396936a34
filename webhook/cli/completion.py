"""`gpu-admission completion bash|zsh`: a completion script made from the parser itself, so it
names every command and flag there is and no other (zsh loads it through bashcompinit)."""

from __future__ import annotations

import argparse
from typing import Any

from webhook.cli.parsing import command as subcommand


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    shown = (a for a in parser._actions if a.help != argparse.SUPPRESS)  # hidden flags stay hidden
    return sorted(option for action in shown for option in action.option_strings)


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    commands = _subcommands(parser)
    cases = []
    for name, command in sorted(commands.items()):
        nested = _subcommands(command)
        if nested:
            cases.append(f'    "{name}") words="{" ".join(sorted(nested))}";;')
            for inner, sub in sorted(nested.items()):
                cases.append(f'    "{name} {inner}") words="{" ".join(_flags(sub))}";;')
        else:
            cases.append(f'    "{name}") words="{" ".join(_flags(command))}";;')
    body = "\n".join(cases)
    bash = f"""# gpu-admission completion ({shell}): eval "$(gpu-admission completion {shell})"
_gpu_admission() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" key="${{COMP_WORDS[1]}}" words
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "{" ".join(sorted(commands))} --help --version" -- "$cur")); return
  fi
  if [ "$COMP_CWORD" -gt 2 ] && [ "$key" = certs ]; then key="certs ${{COMP_WORDS[2]}}"; fi
  case "$key" in
{body}
  esac
  if [[ "$cur" == -* || "$key" == certs ]]; then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -F _gpu_admission gpu-admission kubectl-gpu_admission
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash
    return bash


def register(commands: Any, root: argparse.ArgumentParser) -> None:
    """The command; its script completes `root`'s commands and options."""
    completion = subcommand(
        commands,
        "completion",
        "a shell completion script",
        'Prints a completion script for bash or zsh: eval "$(gpu-admission completion bash)" in ~/.bashrc.',
        "0 printed",
    )
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(run=lambda args: _print(root, args.shell))


def _print(root: argparse.ArgumentParser, shell: str) -> int:
    print(script(root, shell), end="")
    return 0
