"""Quota usage in a replica, by concern: the pods counted and the reservations of pods admitted
but not seen yet (counting/), strict quotas' shared Leases (leases/), and this replica's shares of
them (shares/); above them, what each budget holds in the replica's view and the shares it
grants itself ahead of need (budget_holdings.py), admission against it (quota_admission.py), the
parts built together, complete (tracking.py), reading the Leases back for `gpu-admission quota`
(quota_reader.py), and the `gpu_admission_quota_*` metrics (quota_metrics.py).

Each holds the one below it (composition: none reaches into another's private state). Layers,
top to bottom: tracking; quota_admission, quota_reader and quota_metrics; budget_holdings; shares;
leases; counting. docs/quota-internals.md walks an admission through them."""
