"""What the validating webhook decides: a pod's usage in quota units (usage.py), quota checks
(quota.py), usage held per budget (ledger.py) and what is kept of each counted pod to charge it
again under new policies (pod_facts.py), CEL rules (rules.py), device access (security.py),
verdicts (verdict.py), pod controllers judged by their template (controllers.py), and the whole
decision (validation.py).

May import: mutate (pods are judged as the mutation leaves them), gpu, model, the vocabulary.
"""
