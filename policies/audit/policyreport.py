"""Audit findings as PolicyReports (`wgpolicyk8s.io/v1alpha2`, the Policy WG's format that Policy
Reporter, Kyverno and others read): one `PolicyReport` named `gpu-admission` per namespace with
GPU pods, one `ClusterPolicyReport` for policy-wide budgets. Results are the violations (fail,
warn); the summary counts every GPU pod judged (`pass`: pods with no finding). A report keeps
at most MAX_RESULTS results, so no namespace can grow it past what etcd stores; the summary
still counts them all."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from policies.audit.judging import AuditReport, Finding

REPORT_API_VERSION = "wgpolicyk8s.io/v1alpha2"
REPORT_NAME = "gpu-admission"
SOURCE = "gpu-admission"
REPORT_LABELS = {"app.kubernetes.io/managed-by": "gpu-admission"}
MAX_RESULTS = 1000
TRUNCATED = "gpu-admission.io/results-left-out"


def _resource(finding: Finding) -> dict[str, str]:
    if finding.pod:
        return {
            "apiVersion": "v1",
            "kind": finding.kind,
            "namespace": finding.namespace,
            "name": finding.pod,
            "uid": finding.uid,
        }
    if finding.namespace:
        return {"apiVersion": "v1", "kind": "Namespace", "name": finding.namespace}
    return {"apiVersion": "gpu-admission.io/v1alpha1", "kind": "GPUPolicy", "name": finding.policy}


def _result(finding: Finding, seconds: int) -> dict[str, Any]:
    return {
        "source": SOURCE,
        "policy": finding.policy,
        "rule": finding.rule,
        "result": finding.result,
        "message": finding.message,
        "category": "GPU",
        "severity": "high" if finding.result == "fail" else "medium",
        "scored": True,
        "resources": [_resource(finding)],
        "timestamp": {"seconds": seconds, "nanos": 0},
    }


def _report(kind: str, namespace: str, findings: list[Finding], judged: int, seconds: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": REPORT_NAME, "labels": dict(REPORT_LABELS)}
    if namespace:
        metadata["namespace"] = namespace
    results = sorted(findings, key=lambda f: (f.result != "fail", f.pod, f.policy, f.rule))
    if len(results) > MAX_RESULTS:
        metadata["annotations"] = {TRUNCATED: str(len(results) - MAX_RESULTS)}
    flagged = {(f.kind, f.pod) for f in findings if f.pod}
    summary = {
        "pass": max(judged - len(flagged), 0),
        "fail": sum(f.result == "fail" for f in findings),
        "warn": sum(f.result == "warn" for f in findings),
        "error": 0,
        "skip": 0,
    }
    report: dict[str, Any] = {"apiVersion": REPORT_API_VERSION, "kind": kind, "metadata": metadata, "summary": summary}
    report["results"] = [_result(f, seconds) for f in results[:MAX_RESULTS]]
    return report


def policy_reports(
    audit: AuditReport, seconds: int, namespaces: set[str] | frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """The reports of one audit at `seconds` (Unix time); `namespaces`: ones to report on even with
    nothing in them now (they had a report before: it is emptied, not left stale)."""
    by_namespace: dict[str, list[Finding]] = defaultdict(list)
    for finding in audit.findings:
        by_namespace[finding.namespace].append(finding)
    reports = []
    for namespace in sorted(set(audit.judged) | set(audit.env_sources) | set(by_namespace) | set(namespaces) - {""}):
        if namespace:
            reports.append(
                _report(
                    "PolicyReport",
                    namespace,
                    by_namespace[namespace],
                    audit.judged[namespace] + audit.env_sources[namespace],
                    seconds,
                )
            )
    reports.append(_report("ClusterPolicyReport", "", by_namespace[""], 0, seconds))
    return reports
