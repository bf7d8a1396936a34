"""The audit's reads and writes: pods, namespaces and nodes listed in pages, PolicyReports
created or replaced, Events for new violations (a few a run). Run by the audit process the
leader replica starts (webhook.cluster.audit.background_audit), or by `gpu-admission audit --live`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from policies import REPORT_API_VERSION, REPORT_LABELS, REPORT_NAME, Finding, NodeGpus, node_gpus
from webhook.cluster.api.gpupolicy_reads import read_gpupolicy_texts
from webhook.cluster.watches.namespaces import namespace_labels
from webhook.sources.configmaps import POLICY_LABEL, policy_owner, texts_of

log = logging.getLogger("gpu_admission.audit")
GROUP, VERSION = REPORT_API_VERSION.split("/")
PAGE = 500
TIMEOUT = (2.0, 30.0)
RAW: dict[str, Any] = {"_preload_content": False, "_request_timeout": TIMEOUT}


@dataclass
class ClusterRead:
    pods: Iterator[dict[str, Any]]  # page by page, as judged: 100,000 pods are never all held
    namespaces: dict[str, dict[str, str]]
    nodes: dict[str, NodeGpus]


def _pages(call: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """A list's items, page by page, each with the kind and apiVersion the API server writes only
    on the list itself (a PodList's items carry neither), as the engine judges objects by kind."""
    token = None
    while True:
        body = orjson.loads(call(limit=PAGE, _continue=token, **kwargs, **RAW).data)
        kind = str(body.get("kind") or "").removesuffix("List")
        api_version = body.get("apiVersion")
        for item in body.get("items") or []:
            if kind:
                item.setdefault("kind", kind)
            if api_version:
                item.setdefault("apiVersion", api_version)
            yield item
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return


def read_cluster(api: client.ApiClient) -> ClusterRead:
    core = client.CoreV1Api(api)
    pods = _pages(core.list_pod_for_all_namespaces)
    namespaces = dict(namespace_labels(n) for n in _pages(core.list_namespace))
    nodes = {}
    for raw in _pages(core.list_node):
        gpus = node_gpus(raw)
        nodes[gpus.name] = gpus
    return ClusterRead(pods, namespaces, nodes)


def read_env_sources(api: client.ApiClient, note: Callable[[str], None]) -> Iterator[dict[str, Any]]:
    """Every ConfigMap, then every Secret, page by page, with the caller's rights: a kind they
    may not list is said through `note` and skipped (the webhook's own account lists neither)."""
    core = client.CoreV1Api(api)
    for kind, call in (
        ("ConfigMaps", core.list_config_map_for_all_namespaces),
        ("Secrets", core.list_secret_for_all_namespaces),
    ):
        try:
            yield from _pages(call)
        except ApiException as error:
            if error.status not in (401, 403):
                raise
            note(f"{kind} could not be listed ({error.status} {error.reason}): not judged")


def read_policy_texts(api: client.ApiClient, policy_namespace: str) -> list[tuple[str, str, str | None]]:
    """The policy ConfigMaps and GPUPolicy objects the webhook reads, as (file, text, owner)
    entries: every namespace's ConfigMaps where the caller may list them (team policies too), else
    those of `policy_namespace`. ApiException where even those cannot be read."""
    core = client.CoreV1Api(api)
    try:
        found = list(_pages(core.list_config_map_for_all_namespaces, label_selector=POLICY_LABEL))
    except ApiException as error:
        if error.status not in (401, 403):
            raise
        found = list(_pages(core.list_namespaced_config_map, namespace=policy_namespace, label_selector=POLICY_LABEL))
    entries = []
    for configmap in found:
        namespace = str((configmap.get("metadata") or {}).get("namespace") or policy_namespace)
        owner = policy_owner(namespace, policy_namespace)
        entries += [(file, text, owner) for file, text in texts_of(configmap, namespace)[1]]
    return entries + [(file, text, None) for file, text in read_gpupolicy_texts(api)]


def existing_reports(api: client.ApiClient) -> dict[str, dict[str, Any]] | None:
    """Our PolicyReports by namespace ("" for the ClusterPolicyReport); None where the API server
    serves no PolicyReports (their CRDs are not installed: neither Kyverno's nor ours)."""
    custom = client.CustomObjectsApi(api)
    selector = ",".join(f"{k}={v}" for k, v in REPORT_LABELS.items())
    found: dict[str, dict[str, Any]] = {}
    try:
        listed: Any = custom.list_cluster_custom_object(GROUP, VERSION, "policyreports", label_selector=selector, **RAW)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    body = orjson.loads(listed.data)
    for report in body.get("items") or []:
        found[report["metadata"]["namespace"]] = report
    try:
        got: Any = custom.get_cluster_custom_object(GROUP, VERSION, "clusterpolicyreports", REPORT_NAME, **RAW)
        found[""] = orjson.loads(got.data)
    except ApiException as error:
        if error.status != 404:
            raise
    return found


def write_reports(api: client.ApiClient, reports: list[dict[str, Any]], before: dict[str, dict[str, Any]]) -> int:
    """Create or replace each report; reports whose content did not change are not written."""
    custom = client.CustomObjectsApi(api)
    written = 0
    for report in reports:
        namespace = report["metadata"].get("namespace", "")
        old = before.get(namespace)
        if old is not None and _same(old, report):
            continue
        body = dict(report)
        if old is not None:
            body["metadata"] = {**report["metadata"], "resourceVersion": old["metadata"].get("resourceVersion")}
        plural = "policyreports" if namespace else "clusterpolicyreports"
        if namespace:
            try:
                if old is None:
                    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body, **RAW)
                else:
                    custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, plural, REPORT_NAME, body, **RAW)
            except ApiException as error:
                if not _passing(error):
                    raise
                log.info("audit report of %s not written this pass: %s %s", namespace, error.status, error.reason)
                continue
        elif old is None:
            custom.create_cluster_custom_object(GROUP, VERSION, plural, body, **RAW)
        else:
            custom.replace_cluster_custom_object(GROUP, VERSION, plural, REPORT_NAME, body, **RAW)
        written += 1
    return written


def _passing(error: ApiException) -> bool:
    """A namespace's report that one pass cannot write and the next settles: the namespace is
    being deleted (403 NamespaceTerminating) or gone (404), or the report changed meanwhile
    (409). One namespace never fails the whole audit."""
    if error.status in (404, 409):
        return True
    return error.status == 403 and "NamespaceTerminating" in str(error.body or "")


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Equal but for the results' timestamps: an unchanged namespace costs no write."""

    def strip(report: dict[str, Any]) -> Any:
        results = [{k: v for k, v in r.items() if k != "timestamp"} for r in report.get("results") or []]
        return (report.get("summary"), results, (report.get("metadata") or {}).get("annotations"))

    return bool(strip(old) == strip(new))


def reported(report: dict[str, Any] | None) -> set[tuple[str, str, str]]:
    """(pod uid, policy, rule) of the violations a report already holds."""
    found = set()
    for result in (report or {}).get("results") or []:
        for resource in result.get("resources") or []:
            found.add((str(resource.get("uid", "")), str(result.get("policy")), str(result.get("rule"))))
    return found


def emit_events(api: client.ApiClient, findings: list[Finding], limit: int) -> int:
    """A Warning Event on each violating pod, at most `limit` a run (the rest are in the reports)."""
    core = client.CoreV1Api(api)
    sent = 0
    for finding in findings[:limit]:
        body: Any = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{finding.pod}.", "namespace": finding.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": finding.namespace,
                "name": finding.pod,
                "uid": finding.uid,
            },
            "reason": "PolicyViolation",
            "message": f"{finding.message} [rule {finding.rule}; gpu-admission background audit]"[:1024],
            "type": "Warning",
            "source": {"component": "gpu-admission-audit"},
            "reportingComponent": "gpu-admission-audit",
        }
        try:
            core.create_namespaced_event(finding.namespace, body, _request_timeout=TIMEOUT)
            sent += 1
        except ApiException as error:
            log.warning("audit event on %s/%s not written: %s", finding.namespace, finding.pod, error.status)
    return sent
