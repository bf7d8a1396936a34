"""`gpu-admission serve`: the webhook over TLS, its flags checked before anything starts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from certs.cert_files import CERT_FILE, KEY_FILE
from policies import InputError
from webhook.cli.offline import EXIT_OK
from webhook.cli.parsing import command


def register(commands: Any, root: argparse.ArgumentParser) -> None:
    """The command, its options and exit codes."""
    serve = command(
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
    serve.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
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

    from dataclasses import replace

    from webhook.environment import ServerConfig, share_metrics_directory

    # The environment's settings (checked: one line each and exit 2), the flags over them.
    environment = ServerConfig.from_env()
    config = replace(
        environment,
        policy_dirs=tuple(args.policies or ()),
        fail_open=args.fail_open,
        watch_namespace=args.watch_configmaps or "",
        all_namespaces=args.all_namespaces,
        labelled_namespaces=args.labelled_namespaces,
        manage_certs=args.manage_certs,
        service=args.service,
        serving_names=tuple(args.serving_name),
        cert=args.cert_dir / CERT_FILE,
        key=args.cert_dir / KEY_FILE,
        client_ca=args.client_ca,
        bind=args.bind,
        threads=args.threads,
        read_timeout=args.read_timeout,
        metrics_bind=args.metrics_bind or environment.metrics_bind,
    )
    # The master's and the worker's metrics add up only if prometheus_client sees this before its
    # first import.
    share_metrics_directory()
    from webhook.replica import serve

    serve(config)
    return EXIT_OK
