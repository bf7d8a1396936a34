"""The engine: pure, I/O-free decisions about GPU pods. No web framework, server, cluster client,
TLS, OS or clock (CI's import contracts hold it to that); time comes in as an argument.

This module is the engine's front door: the edge (`webhook/`) imports what it needs from here
alone, and an import contract holds it to that. Tools and tests may reach further in.

A folder is a layer; each imports only those below it (pyproject.toml's import contracts state
every pair, and the order of the modules inside each folder too):

    audit/          the background audit of running pods, and its PolicyReports
    native/         what the API server can judge itself: rules as ValidatingAdmissionPolicies
                    (beside audit/, on one layer: neither imports the other)
    engine.py       one call per admission question: mutate, validate (Engine)
    judge/          what the validating webhook decides: usage, quotas, the ledger, CEL rules,
                    device access, verdicts, workloads
    mutate/         what the mutating webhook writes: the MIG rewrite, runtime settings, the
                    Triton sidecar (beside judge/, on one layer: neither imports the other)
    planning/       what a review decides once about a pod: which policies apply and how, the
                    MIG plan, the Triton sidecar's settings
    review/         what a review brings, as read: the pod and its containers, the request,
                    what is known of the cluster, the JSON document and its patch
    model/          policies: the GPUPolicy model, its YAML with lines, the loader, CEL, selectors,
                    and the compiled, indexed PolicySet that is swapped whole
    gpu/            NVIDIA's GPUs: models, the catalog, cloud labels, devices, DRA claims, free
                    capacity, where a pod may land and what it costs there
    quantity.py, json_fields.py, memo.py, errors.py
                    Kubernetes quantities, reading the requester's JSON with field paths, the
                    one caching idiom, the two error families

The image runs these modules compiled by mypyc from this same source (tools/compile_engine.py;
COMPILED says which): so what is written here stays what mypyc compiles. No class is made at
run time outside model/yamldoc.py. Value classes follow one rule by how often a value is made
(docs/architecture.md, with bench/value_classes.py's figures): frozen dataclasses for what is
loaded once, plain slotted classes for what a review makes many of, NamedTuples for the few
records a review makes once and its callers take apart.
"""

from policies.audit.judging import AuditReport, Finding, audit_env_sources, audit_pods
from policies.audit.policyreport import REPORT_API_VERSION, REPORT_LABELS, REPORT_NAME, policy_reports
from policies.engine import COMPILED, Engine
from policies.errors import InputError, PolicyProblem
from policies.gpu.capacity import Capacity, CapacityLedger, NodeGpus, node_gpus, node_uses
from policies.gpu.catalog import CATALOG
from policies.gpu.claims import ClaimDemand, claim_demand, unreadable_claim, with_allocation
from policies.gpu.device_cel import DeviceSelector
from policies.gpu.device_classes import DEFAULT_CLASSES, DeviceClass, DeviceClasses, read_device_class
from policies.gpu.device_reach import Reach
from policies.gpu.dra_devices import DraDevice
from policies.gpu.dra_inventory import (
    DraInventory,
    WithDra,
    allocated_devices,
    dual_advertised,
    read_slice,
    read_taint_rule,
)
from policies.gpu.models import CONFIG_STATE_LABEL
from policies.judge.budgets import BudgetCounts, BudgetReads
from policies.judge.env_sources import ENV_SOURCE_KINDS
from policies.judge.headroom import QuotaLine, amount_text, bar, quota_lines, scopes
from policies.judge.ledger import Ledger, PodCounts
from policies.judge.pod_facts import (
    Charges,
    PodFacts,
    moved,
)
from policies.judge.pod_reading import PodReading
from policies.judge.quota import Amount, amounts
from policies.judge.usage import EMPTY, Usage, counts_against_quota, gpus_held
from policies.judge.validation import Decision
from policies.judge.verdict import Verdict
from policies.model.advice import overlapping_profiles
from policies.model.loader import LoadResult, load_texts
from policies.model.policy import Action, Consistency, GPUPolicy, Quota
from policies.model.policyset import Lapsed, PolicySet
from policies.model.workload_kinds import BUILT_IN_TABLE
from policies.model.workloads import WorkloadKind
from policies.model.yamldoc import read_data
from policies.mutate.mutation import MutationResult
from policies.native.validating import NameClash, native_policies
from policies.native.webhook_scope import why_not_sent
from policies.planning.published import policy_ladders, publishes, why_published
from policies.review.cluster import (
    NO_CLUSTER,
    ClusterState,
    GroupClaims,
    KnownCluster,
    is_pod_group,
    limits_whole_gpus,
    pod_group_claims,
)
from policies.review.pod import PodView, parse_pod
from policies.review.request import Operation, RequestInfo

__all__ = [
    "policy_ladders",
    "publishes",
    "why_published",
    "COMPILED",
    "Engine",
    "InputError",
    "PolicyProblem",
    "Operation",
    "RequestInfo",
    "PodView",
    "parse_pod",
    "NO_CLUSTER",
    "ClusterState",
    "KnownCluster",
    "GroupClaims",
    "is_pod_group",
    "pod_group_claims",
    "limits_whole_gpus",
    "MutationResult",
    "NameClash",
    "native_policies",
    "why_not_sent",
    "BudgetCounts",
    "BudgetReads",
    "Decision",
    "Verdict",
    "EMPTY",
    "Usage",
    "counts_against_quota",
    "gpus_held",
    "Amount",
    "amounts",
    "QuotaLine",
    "amount_text",
    "bar",
    "quota_lines",
    "scopes",
    "Ledger",
    "PodCounts",
    "Charges",
    "PodFacts",
    "PodReading",
    "moved",
    "ENV_SOURCE_KINDS",
    "AuditReport",
    "Finding",
    "audit_env_sources",
    "audit_pods",
    "REPORT_API_VERSION",
    "REPORT_LABELS",
    "REPORT_NAME",
    "policy_reports",
    "Action",
    "Consistency",
    "GPUPolicy",
    "Quota",
    "Lapsed",
    "PolicySet",
    "LoadResult",
    "load_texts",
    "read_data",
    "overlapping_profiles",
    "WorkloadKind",
    "BUILT_IN_TABLE",
    "CATALOG",
    "CONFIG_STATE_LABEL",
    "Capacity",
    "CapacityLedger",
    "NodeGpus",
    "node_gpus",
    "node_uses",
    "ClaimDemand",
    "claim_demand",
    "unreadable_claim",
    "with_allocation",
    "DEFAULT_CLASSES",
    "DeviceClass",
    "DeviceClasses",
    "DeviceSelector",
    "Reach",
    "DraDevice",
    "read_device_class",
    "DraInventory",
    "WithDra",
    "allocated_devices",
    "read_slice",
    "read_taint_rule",
    "dual_advertised",
]
