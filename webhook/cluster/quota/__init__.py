"""Quota usage in a replica: counters per (policy, scope) fed by the pod watch with local
reservations (pod_counting.py, reservations.py), what each budget holds in the replica's view and
the shares it grants itself ahead of need (budget_view.py), admission against them
(quota_admission.py), the three built together, complete (tracking.py),
strict quotas' shared Leases (shared_quota.py; read, written and watched by ledger_leases.py;
their entries as stored, ledger.py) and this replica's shares of them (escrow.py; granted and
written again by share_writers.py), reading the Leases back for `gpu-admission quota`
(quota_reader.py), and the `gpu_admission_quota_*` metrics (quota_metrics.py).

Each holds the one below it (composition: none reaches into another's private state). Layers,
top to bottom: tracking; quota_admission, quota_reader and quota_metrics; budget_view; pod_counting;
share_writers; escrow; shared_quota; ledger_leases; reservations and ledger."""
