"""`validate` and `lint`: mutation then validation, as the API server would run them, offline."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from policies import (
    CATALOG,
    NO_CLUSTER,
    CapacityLedger,
    ClusterState,
    Decision,
    Engine,
    GroupClaims,
    InputError,
    KnownCluster,
    Ledger,
    MutationResult,
    NodeGpus,
    PodView,
    PolicyProblem,
    WithDra,
    claim_demand,
    counts_against_quota,
    dual_advertised,
    gpus_held,
    is_pod_group,
    load_texts,
    node_gpus,
    node_uses,
    overlapping_profiles,
    parse_pod,
    pod_group_claims,
    policy_ladders,
    publishes,
    read_slice,
)
from webhook.cli.inputs import Inputs, read_inputs
from webhook.cluster.watches.claims import CLAIM_KINDS, ClaimCache
from webhook.cluster.watches.device_classes import DeviceClassCache
from webhook.cluster.watches.namespaces import GpuQuotaCache, namespace_labels
from webhook.cluster.watches.slices import DraCapacity
from webhook.events import Events  # offline, nothing reacts to what the caches learn
from webhook.sources.policy_files import directory_texts, read_manifests

EXIT_OK, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2
CLUSTER_KINDS = (
    "cluster state holds Pods, Namespaces, Nodes, ResourceQuotas, ResourceClaims, ResourceClaimTemplates, "
    "DeviceClasses, ResourceSlices, PodGroups, ConfigMaps and Secrets only"
)


@dataclass(frozen=True)
class Judged:
    label: str
    mutation: MutationResult
    decision: Decision


def judge(engine: Engine, label: str, document: Any, ledger: Ledger, cluster: ClusterState = NO_CLUSTER) -> Judged:
    try:
        mutation = engine.mutate_any(document, cluster=cluster)
        kind = str(document.get("kind"))
        decision = engine.validate(mutation.object if kind == "Pod" else document, ledger, cluster=cluster)
    except InputError as error:
        raise error.in_document(label) from None
    if decision.allowed and kind == "Pod":
        ledger.charge(decision.charges, decision.own_usage, decision.shared)
    return Judged(label, mutation, decision)


def _text(judged: Judged) -> str:
    verdict = "allowed" if judged.decision.allowed else "DENIED"
    lines = [f"{judged.label}: {verdict}"]
    lines += [f"  mutated: {change}" for change in judged.mutation.changes]
    lines += [f"  warning: {w}" for w in judged.mutation.warnings if not w.startswith("will be denied")]
    lines += [f"  {v.action.value}: {v}" for v in judged.decision.verdicts]
    lines += [f"  note: {n}" for n in _notes(judged)]
    if judged.decision.policies:
        lines.append(f"  policies: {', '.join(judged.decision.policies)}")
    return "\n".join(lines)


def _notes(judged: Judged) -> list[str]:
    """Who makes a workload's pods, and what the pod webhook will do to them (said once)."""
    return [n for n in judged.decision.notes if n not in judged.mutation.warnings]


def _json(judged: Judged) -> dict[str, object]:
    return {
        "object": judged.label,
        "allowed": judged.decision.allowed,
        "policies": list(judged.decision.policies),
        "changes": [{"path": c.path, "change": c.what, "policy": c.policy} for c in judged.mutation.changes],
        "verdicts": [
            {"action": v.action.value, "policy": v.policy, "rule": v.rule, "path": v.path, "message": v.message}
            for v in judged.decision.verdicts
        ],
        "warnings": [*judged.mutation.warnings, *judged.decision.warnings],  # as -o text prints them
        "notes": _notes(judged),
        "auditAnnotations": judged.decision.audit_annotations,
    }


def cluster_state(path: str) -> tuple[list[Any], KnownCluster]:
    """The pods of a `kubectl get pods,namespaces,nodes,resourcequotas -A -o yaml` dump, and what the
    engine may know of the cluster from it: namespace labels, free GPU capacity per model and
    profile, ResourceQuotas on whole GPUs."""
    pods, cluster, _, _ = cluster_state_with_nodes(path)
    return pods, cluster


def cluster_state_with_nodes(path: str) -> tuple[list[Any], KnownCluster, dict[str, NodeGpus], list[Any]]:
    """cluster_state, what each Node says of its GPUs (the audit's servable check), and the
    ConfigMaps and Secrets it holds (the audit's env sources), in one read."""
    nodes: dict[str, NodeGpus] = {}
    pods: list[Any] = []
    views: list[PodView] = []
    namespaces: dict[str, dict[str, str]] = {}
    resource_quotas: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    device_classes: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    env_sources: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], GroupClaims] = {}
    capacity = CapacityLedger(CATALOG)
    for label, item in read_manifests(path):
        if not isinstance(item, dict):
            raise InputError("", CLUSTER_KINDS, label)
        kind = item.get("kind")
        if kind == "Pod":
            pods.append(item)
            try:
                views.append(parse_pod(item))
            except InputError as error:
                raise error.in_document(label) from None
        elif kind == "Namespace":
            name, labels = namespace_labels(item)
            namespaces[name] = labels
        elif kind == "Node":
            gpus = node_gpus(item)
            nodes[gpus.name] = gpus
            capacity.set_node(gpus)
            capacity.mark_synced()
        elif kind == "ResourceQuota":
            resource_quotas.append(item)
        elif kind in CLAIM_KINDS:
            claims.append(item)
        elif kind == "DeviceClass":
            device_classes.append(item)
        elif kind == "ResourceSlice":
            slices.append(item)
        elif kind in ("ConfigMap", "Secret"):
            env_sources.append(item)
        elif is_pod_group(item.get("apiVersion"), kind):
            groups[_group_key(item, "default")] = pod_group_claims(item)
        else:
            raise InputError("kind", CLUSTER_KINDS, label)
    capacity.replace_uses(node_uses((v.node_name, gpus_held(v)) for v in views if counts_against_quota(v)))
    quotas = GpuQuotaCache()
    quotas.replace_all(resource_quotas)
    known = ClaimCache(Events())
    for template in (False, True):
        known.lister(template)(c for c in claims if (c.get("kind") == CLAIM_KINDS[1]) is template)
    classes = DeviceClassCache(Events())
    if device_classes:  # a file that holds classes holds them all; one that holds none says nothing of them
        classes.replace_all(device_classes)
    inventory = DraCapacity()
    inventory.slices_listed(slices)
    inventory.claims_listed(c for c in claims if c.get("kind") == CLAIM_KINDS[0])
    with_dra = WithDra(capacity, inventory, lambda: classes.classes)
    # Claims a file does not hold may exist: a pod naming one is warned of, not denied.
    cluster = KnownCluster(
        namespaces,
        with_dra,
        quotas.by_namespace(),
        known.demands(),
        device_classes=classes.classes,
        devices=inventory,
        groups=groups,
    )
    return pods, cluster, nodes, env_sources


def judge_all(
    engine: Engine, files: list[str], namespace: str, state: str | None, webhook: str | None = "/validate"
) -> tuple[Inputs, list[Judged]]:
    """Every judgeable document of `files` (those the shipped webhooks of `webhook` would be sent;
    None: all the engine judges), in order, as the API server would admit them one by one: the
    pods of the cluster state (a file, or none) counted first, earlier ones of `files` counted for
    later ones, and a claim, claim template or PodGroup admitted known to what comes after it."""
    pods, cluster = cluster_state(state) if state else ([], KnownCluster())
    ledger = Ledger.from_pods(pods, engine.policy_set, cluster)
    inputs = read_inputs(files, engine, namespace, webhook)
    cluster = with_ladders(cluster, engine, {_namespace_of(doc, namespace) for _, doc in inputs.judged})
    results: list[Judged] = []
    for label, document, judging in inputs.documents:
        if not isinstance(document, dict):
            continue
        if not judging:  # no webhook of ours is sent a PodGroup, but its pods share its claims
            if is_pod_group(document.get("apiVersion"), document.get("kind")):
                groups = {**cluster.groups, _group_key(document, namespace): pod_group_claims(document)}
                cluster = replace(cluster, groups=groups)
            continue
        judged = judge(engine, label, document, ledger, cluster)
        results.append(judged)
        if judged.decision.allowed and document.get("kind") in CLAIM_KINDS:
            cluster = _knowing(cluster, document)
    return inputs, results


def _group_key(document: dict[str, Any], namespace: str) -> tuple[str, str]:
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return _namespace_of(document, namespace), name if isinstance(name, str) else ""


def _knowing(cluster: KnownCluster, document: dict[str, Any]) -> KnownCluster:
    """The cluster once a claim or claim template of the input is made: known to the pods and
    workloads after it, read as the claim watch reads one."""
    template = document.get("kind") == CLAIM_KINDS[1]
    made = ClaimCache(Events())
    made.lister(template)([document])
    return replace(cluster, claims={**cluster.claims, **made.demands()})


def _namespace_of(document: dict[str, object], default: str) -> str:
    metadata = document.get("metadata")
    found = metadata.get("namespace") if isinstance(metadata, dict) else None
    return found if isinstance(found, str) and found else default


def with_ladders(cluster: KnownCluster, engine: Engine, namespaces: set[str]) -> KnownCluster:
    """The cluster with the ladder templates the replicas would have published in `namespaces`
    (webhook.cluster.ladders), where the state holds no template of that name."""
    capacity, claims = cluster.capacity, dict(cluster.claims)
    for policy in engine.policy_set.policies:
        if not publishes(policy, CATALOG, capacity):
            continue
        for name, ladder in policy_ladders(policy, CATALOG, capacity).items():
            spec = ladder.spec(CATALOG)["spec"]
            demand = claim_demand(spec, "spec.spec")
            for namespace in namespaces:
                claims.setdefault((namespace, True, name), demand)
    return replace(cluster, claims=claims)


def cmd_validate(args: argparse.Namespace, engine: Engine) -> int:
    inputs, results = judge_all(engine, args.file, args.namespace, args.cluster_state)
    denied = sum(not r.decision.allowed for r in results)
    warned = sum(r.decision.allowed and bool(r.mutation.warnings or r.decision.warnings) for r in results)
    skipped = len(inputs.documents) - len(results)
    if args.output == "json":
        summary = {
            "judged": len(results),
            "allowed": len(results) - denied - warned,
            "warned": warned,
            "denied": denied,
            "skipped": skipped,
        }
        print(json.dumps({"summary": summary, "results": [_json(r) for r in results]}, indent=2))
    elif results:
        print("\n".join(_text(r) for r in results))
    inputs.say_skipped()
    print(
        f"{len(results)} judged: {len(results) - denied - warned} allowed, {warned} allowed with warnings, "
        f"{denied} denied; {skipped} skipped",
        file=sys.stderr,
    )
    return EXIT_OK if not denied else EXIT_DENIED


def _finding(problem: PolicyProblem, severity: str) -> dict[str, object]:
    return {
        "severity": severity,
        "file": problem.file,
        "line": problem.line,
        "policy": problem.policy,
        "path": problem.path,
        "message": problem.message,
    }


def class_collisions(path: str) -> list[PolicyProblem]:
    """DeviceClasses of a cluster state (`kubectl get deviceclasses -o yaml`) that serve one extended
    resource: the scheduler takes the one made last, so the others serve nothing by that name."""
    cache = DeviceClassCache(Events())
    cache.replace_all(
        item for _, item in read_manifests(path) if isinstance(item, dict) and item.get("kind") == "DeviceClass"
    )
    return [
        PolicyProblem(
            path,
            1,
            "",
            "",
            f"{name} is served by {len(names)} DeviceClasses ({', '.join(names)}): the one made last wins, "
            "the others serve nothing by that name",
        )
        for name, names in cache.classes.collisions()
    ]


def dual_advertised_nodes(path: str) -> list[PolicyProblem]:
    """Nodes of a cluster state (`kubectl get nodes,resourceslices -o yaml`) whose GPUs both the
    device plugin and NVIDIA's DRA driver advertise: free capacity counts them once, but either
    may hand out a GPU the other did (`mig.dualAdvertisedNodes`)."""
    items = [item for _, item in read_manifests(path) if isinstance(item, dict)]
    nodes = [node_gpus(item) for item in items if item.get("kind") == "Node"]
    slices = [read_slice(item, CATALOG) for item in items if item.get("kind") == "ResourceSlice"]
    found = sorted(dual_advertised(nodes, slices))
    if not found:
        return []
    message = (
        f"nodes {', '.join(found)}: their GPUs are advertised both by the device plugin and by NVIDIA's DRA "
        "driver, and either may hand out a GPU the other did: keep GPU pods off them (mig.dualAdvertisedNodes: "
        "avoid) or serve them one way"
    )
    return [PolicyProblem(path, 1, "", "", message)]


def cmd_lint(args: argparse.Namespace) -> int:
    texts: list[tuple[str, str]] = []
    for target in args.paths:
        path = Path(target)
        if path.is_dir():
            texts.extend(directory_texts(path))
        elif path.is_file():
            texts.append((str(path), path.read_text(encoding="utf-8")))
        else:
            raise FileNotFoundError(f"{target}: not a policy directory or file")
    result = load_texts(texts)
    accepted = frozenset(frozenset(pair) for pair in args.allow_overlap or ())
    advice = [*result.advice, *overlapping_profiles(result.policies, accepted)]
    if getattr(args, "cluster_state", None):
        advice += class_collisions(args.cluster_state) + dual_advertised_nodes(args.cluster_state)
    if args.output == "json":
        findings = [_finding(p, "error") for p in result.problems] + [_finding(a, "warning") for a in advice]
        summary = {"files": len(texts), "policies": [p.name for p in result.policies], "findings": findings}
        print(json.dumps(summary, indent=2))
    else:
        for problem in result.problems:
            print(problem)
        for found in advice:
            print(f"{found.file}:{found.line}: warning: {str(found).split(': ', 1)[1]}")
    if not texts:
        print("no policy files found", file=sys.stderr)
        return EXIT_DENIED
    names = ", ".join(p.name for p in result.policies) or "none"
    print(
        f"{len(texts)} files, {len(result.policies)} policies loaded ({names}), "
        f"{len(result.problems)} problems, {len(advice)} warnings",
        file=sys.stderr,
    )
    return EXIT_DENIED if result.problems or (advice and args.strict) else EXIT_OK


def load_engine(policies: list[Path] | None) -> Engine:
    """The engine of `--policies` (bundled without), or exit 2 naming each problem."""
    from webhook.sources.policy_files import load_policies

    policy_set, result = load_policies(policies)
    for problem in result.problems:
        print(f"error: {problem}", file=sys.stderr)
    if result.problems:
        raise SystemExit(EXIT_BAD_INPUT)
    return Engine(policy_set)
