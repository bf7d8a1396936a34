"""`gpu-admission quota`: per policy and scope, each limit with what is used, reserved and left,
and a bar, from `--cluster-state` or the live cluster (read-only, through the kubeconfig)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policies import Ledger, PolicySet, QuotaLine, amount_text, bar, quota_lines, scopes
from webhook.cli.offline import cluster_state
from webhook.cli.parsing import DEFAULT_POLICY_NAMESPACE, cluster_options, command
from webhook.sources.policy_files import load_policies, policy_set_of

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def _policies(paths: list[Path] | None, live_texts: list[tuple[str, str]] | None) -> PolicySet:
    if paths or live_texts is None:
        policy_set, result = load_policies(paths)
        problems = result.problems
    else:
        policy_set, problems = policy_set_of((file, text, None) for file, text in live_texts)
    for problem in problems:
        print(f"warning: {problem} (left out)", file=sys.stderr)
    return policy_set


def _row(line: QuotaLine) -> list[str]:
    scope = line.scope or "(policy-wide)"
    if line.per_pod:
        return [line.policy, scope, line.dimension, "", "", amount_text(line.limit), "", ""]
    values = (line.used, line.reserved, line.limit, line.left)
    return [line.policy, scope, line.dimension, *(amount_text(v) for v in values), bar(line)]


def text(lines: list[QuotaLine]) -> str:
    header = ["POLICY", "SCOPE", "LIMIT ON", "USED", "RESERVED", "LIMIT", "LEFT", ""]
    rows = [header, *(_row(line) for line in lines)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def as_json(line: QuotaLine) -> dict[str, object]:
    return {
        "policy": line.policy,
        "scope": line.scope or None,
        "dimension": line.dimension,
        "used": str(line.used),
        "reserved": str(line.reserved),
        "limit": str(line.limit),
        "left": str(line.left),
    }


def dual_note(nodes: frozenset[str]) -> list[str]:
    """What `quota` says of nodes whose GPUs both the device plugin and the DRA driver advertise."""
    if not nodes:
        return []
    return [
        f"nodes {', '.join(sorted(nodes))}: GPUs advertised both by the device plugin and by NVIDIA's DRA driver "
        "(counted once as free capacity; either may hand out a GPU the other did)"
    ]


def cmd_quota(args: argparse.Namespace) -> int:
    if args.cluster_state:
        pods, cluster = cluster_state(args.cluster_state)
        policy_set = _policies(args.policies, None)
        namespaces: dict[str, Mapping[str, str] | None] = dict(cluster.namespaces)
        reserved = Ledger()
        notes: list[str] = dual_note(cluster.capacity.dual_advertised())
    else:
        from webhook.cluster.quota.quota_reader import Unreachable, read_live  # the client only when used

        try:
            live = read_live(
                args.namespace, args.policy_namespace, args.kubeconfig, args.context, args.as_user, args.as_group
            )
        except Unreachable as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_BAD_INPUT
        pods, namespaces, reserved = live.pods, live.namespaces, live.reserved
        notes = [*live.notes, *dual_note(live.dual_advertised)]
        if live.policy_texts is None and not args.policies:
            # Without the policies nothing can be said: "no quota holds anything" would be a false green.
            for note in notes:
                print(f"note: {note}", file=sys.stderr)
            print(
                f"error: the policies in {args.policy_namespace} could not be read; ask for the "
                "gpu-admission-policy-reader role, or give --policies",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        policy_set = _policies(args.policies, live.policy_texts)
        from policies import KnownCluster

        cluster = KnownCluster({k: v for k, v in namespaces.items() if v is not None})
    if args.namespace and args.namespace not in namespaces:
        namespaces[args.namespace] = None
    used = Ledger.from_pods(pods, policy_set, cluster)
    shown = scopes(policy_set, namespaces, used.held() + reserved.held(), args.namespace)
    lines = quota_lines(shown, used, reserved)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.output == "json":
        print(json.dumps([as_json(line) for line in lines], indent=2))
    elif lines:
        print(text(lines))
    else:
        where = f" in {args.namespace}" if args.namespace else ""
        print(f"no quota{where} holds anything (or no policy sets one)", file=sys.stderr)
    return EXIT_OK


def register(commands: Any, root: argparse.ArgumentParser) -> None:
    """The command, its options and exit codes."""
    quota = command(
        commands,
        "quota",
        "what is used, reserved and left of each GPU quota",
        "Per policy and scope: each limit with what is used (pods counted), reserved (admissions under "
        "strict quotas not yet seen as pods), left, and a bar; per-pod caps too. From --cluster-state, "
        "else the live cluster through the kubeconfig (read-only: pods, namespaces, GPUPolicy objects, the policy "
        "ConfigMaps and strict-quota Leases in --policy-namespace; what the kubeconfig may not read is said and "
        "left out).",
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
    cluster_options(quota)
    quota.set_defaults(run=cmd_quota)
