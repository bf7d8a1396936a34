"""`gpu-admission audit`: existing GPU pods judged against the current policies and nodes, as the
background audit does (policies.audit.judging); offline from `--cluster-state`, or `--live` from
the cluster (the leader replica runs `audit --live --write-reports` in a process of its own)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from policies import AuditReport, Engine, Finding, KnownCluster, audit_env_sources, audit_pods, policy_reports
from webhook.cli.offline import cluster_state_with_nodes
from webhook.cli.parsing import DEFAULT_POLICY_NAMESPACE, cluster_options, command
from webhook.sources.policy_files import load_policies, policy_set_of

EXIT_OK, EXIT_VIOLATIONS, EXIT_BAD_INPUT = 0, 1, 2
EVENTS_PER_RUN = 20


def _engine(args: argparse.Namespace, api: Any = None) -> Engine:
    """The policies to judge with: the leader's versions in force (its audit process), the files
    given, else, live, the cluster's own policy ConfigMaps (what the webhook enforces), else the
    bundled default."""
    if args.policy_snapshot:
        # The leader's versions in force: loaded there already, so problems cannot arise here.
        entries = json.loads(Path(args.policy_snapshot).read_text())
        snapshot, _ = policy_set_of((file, text, namespace) for file, text, namespace in entries)
        return Engine(snapshot)
    if api is not None and not args.policies:
        from webhook.cluster.audit.audit_io import read_policy_texts

        texts = read_policy_texts(api, args.policy_namespace)
        if not texts:
            print(
                f"error: no policy ConfigMaps in the cluster ({args.policy_namespace}); give --policies",
                file=sys.stderr,
            )
            raise SystemExit(EXIT_BAD_INPUT)
        live, problems = policy_set_of(texts)
        for problem in problems:
            print(f"warning: {problem} (left out, as the webhook keeps its last good version)", file=sys.stderr)
        print(f"note: judged with the cluster's {len(live.policies)} policies", file=sys.stderr)
        return Engine(live)
    policy_set, result = load_policies(args.policies)
    for problem in result.problems:
        print(f"error: {problem}", file=sys.stderr)
    if result.problems:
        raise SystemExit(EXIT_BAD_INPUT)
    return Engine(policy_set)


def _text(report: AuditReport) -> str:
    lines = []
    for f in sorted(report.findings, key=lambda f: (f.namespace, f.kind, f.pod, f.policy, f.rule)):
        subject = f"{f.kind} {f.namespace}/{f.pod}" if f.pod else f"scope {f.namespace or '(policy-wide)'}"
        lines.append(f"{f.result.upper()} {subject}: {f.message} [policy {f.policy}, rule {f.rule}]")
    judged = f"{sum(report.judged.values())} GPU pods"
    if report.env_sources:
        judged += f", {sum(report.env_sources.values())} ConfigMaps and Secrets"
    lines.append(f"{judged} judged, {len(report.findings)} findings")
    return "\n".join(lines)


def _json(finding: Finding) -> dict[str, str]:
    return dataclasses.asdict(finding)


def cmd_audit(args: argparse.Namespace) -> int:
    if not args.live:
        return _audit(args)
    import urllib3
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config import ConfigException

    try:
        return _audit(args)
    except (ConfigException, ApiException, OSError, urllib3.exceptions.HTTPError) as error:
        # No cluster behind the kubeconfig is bad input (exit 2), not a violation, never a traceback.
        print(f"error: the cluster could not be read ({type(error).__name__}: {error})", file=sys.stderr)
        return EXIT_BAD_INPUT


def _audit(args: argparse.Namespace) -> int:
    pods: Iterable[Any]
    env_sources: Iterable[Any] = ()
    if args.live:
        from webhook.cluster.api.identity import api_client, impersonate, load_config
        from webhook.cluster.audit.audit_io import read_cluster, read_env_sources  # the client only when used

        load_config(args.kubeconfig, args.context)
        api = api_client()
        try:
            impersonate(api, args.as_user, args.as_group)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        engine = _engine(args, api)
        read = read_cluster(api)
        pods, cluster, nodes = read.pods, KnownCluster(read.namespaces), read.nodes
        if args.env_sources:
            env_sources = read_env_sources(api, lambda note: print(f"note: {note}", file=sys.stderr))
    elif args.cluster_state:
        engine = _engine(args)
        pods, cluster, nodes, held = cluster_state_with_nodes(args.cluster_state)
        env_sources = held if args.env_sources else ()
        api = None
    else:
        print("error: give --cluster-state FILE, or --live to read the cluster", file=sys.stderr)
        return EXIT_BAD_INPUT
    started = time.monotonic()
    report = audit_pods(engine, pods, cluster, nodes)
    audit_env_sources(engine, env_sources, report, cluster)
    summary: dict[str, Any] = {
        "judged": sum(report.judged.values()),
        "env_sources_judged": sum(report.env_sources.values()),
        "findings": len(report.findings),
        "violations": [{"policy": p, "rule": r, "count": n} for (p, r), n in sorted(report.violations().items())],
        "seconds": round(time.monotonic() - started, 3),
    }
    if args.write_reports and api is not None:
        summary.update(_write(api, report, args.events))
    if args.output == "json":
        print(json.dumps({"summary": summary, "findings": [_json(f) for f in report.findings]}, indent=2))
    elif args.output == "policyreport":
        print(yaml.safe_dump_all(policy_reports(report, int(time.time())), sort_keys=False), end="")
    elif args.output == "summary":
        print(json.dumps(summary))
    else:
        print(_text(report))
    return EXIT_VIOLATIONS if any(f.result == "fail" for f in report.findings) else EXIT_OK


NO_REPORTS = "install the wgpolicyk8s.io CRDs: Kyverno's, or deploy/overlays/policyreport-crds"


def _write(api: Any, report: AuditReport, events: int) -> dict[str, Any]:
    from webhook.cluster.audit.audit_io import emit_events, existing_reports, reported, write_reports

    before = existing_reports(api)
    missing: dict[str, Any] = {}
    if before is None:
        print(f"note: the API server serves no PolicyReports: {NO_REPORTS}; events only", file=sys.stderr)
        written, before, missing = 0, {}, {"reports_missing": NO_REPORTS}
    else:
        reports = policy_reports(report, int(time.time()), set(before))
        written = write_reports(api, reports, before)
    fresh = [
        f
        for f in report.findings
        if f.pod and f.result == "fail" and (f.uid, f.policy, f.rule) not in reported(before.get(f.namespace))
    ]
    return {"reports_written": written, "events": emit_events(api, fresh, events), **missing}


def register(commands: Any, root: argparse.ArgumentParser) -> None:
    """The command, its options and exit codes."""
    audit = command(
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
        help="policy files or directories (default: with --live the cluster's policy ConfigMaps and GPUPolicy "
        "objects, else bundled)",
    )
    audit.add_argument(
        "--policy-namespace", default=DEFAULT_POLICY_NAMESPACE, help="with --live: the webhook's namespace"
    )
    audit.add_argument(
        "--live", action="store_true", help="read the cluster (--kubeconfig/--context, in-cluster config, KUBECONFIG)"
    )
    cluster_options(audit)
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
