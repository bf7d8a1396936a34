"""`gpu-admission certs generate | client`: TLS material for the webhook and the API server."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from policies import InputError
from webhook.cli.offline import EXIT_OK
from webhook.cli.parsing import command


def register(commands: Any, root: argparse.ArgumentParser) -> None:
    """The command group, its commands, their options and exit codes."""
    certs = commands.add_parser(
        "certs", help="TLS material", description="TLS material: generate or client.", allow_abbrev=False
    )
    certs_commands = certs.add_subparsers(dest="certs_command", required=True, metavar="{generate,client}")
    generate = command(
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
    client = command(
        certs_commands,
        "client",
        "a client CA and a client certificate for the API server (serve --client-ca)",
        "Writes client-ca.crt (for serve --client-ca), client.crt and client.key to --out.",
        "0 written; 2 --out cannot be written",
    )
    client.add_argument("--out", type=Path, required=True)
    client.add_argument("--name", default="kube-apiserver", help="the certificate's common name")
    client.set_defaults(run=cmd_client_certs)


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
    from certs.cert_files import generate

    _key_directory(args.out)
    if (args.out / "ca.key").exists() and not args.force:
        raise InputError("--out", f"{args.out} holds a CA already (ca.key): give --force to replace it")
    generate(args.out, args.service, args.namespace, args.dns_name or [], args.ip or [])
    print(f"wrote {args.out}/ca.crt, ca.key, tls.crt, tls.key for {args.service}.{args.namespace}.svc")
    return EXIT_OK


def cmd_client_certs(args: argparse.Namespace) -> int:
    from certs.cert_files import generate_client

    _key_directory(args.out)
    generate_client(args.out, args.name)
    print(f"wrote {args.out}/client-ca.crt (for serve --client-ca) and client.crt, client.key (CN {args.name})")
    return EXIT_OK
