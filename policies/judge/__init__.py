"""What the validating webhook decides: a pod's usage in quota units (usage.py), quota checks
(quota.py) and a pod's budgets left to settle on the counts when they are read (budgets.py),
usage held per budget (ledger.py) and what is kept of each counted pod to charge it
again under new policies (pod_facts.py), how a replica's counters read the pods their watch
shows (pod_reading.py), CEL rules (rules.py), device access (security.py),
verdicts (verdict.py), pod controllers judged by their template (controllers.py) and what their
replicas earn at apply time (apply_time.py), ConfigMaps and
Secrets that envFrom could take devices from (env_sources.py), DRA devices charged in quota units
(device_charge.py), DRA claims charged (claim_usage.py), held to the policy (claim_checks.py)
and judged at their own creation (claim_objects.py), and the whole decision (validation.py).

May import: planning (the same plan the mutation made), the review, the policy model, gpu. Never
mutate: the engine hands a workload's pods to the mutation before judging them.
"""
