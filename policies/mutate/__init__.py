"""What the mutating webhook writes into a pod: the MIG rewrite of a plan (rewrite.py), runtime
settings (runtime.py), the Triton sidecar (triton.py), and the whole mutation with its record
(mutation.py), on the review's copy-on-write Draft.

May import: planning, the review, the policy model, gpu. Never judge: mutation does not know
about verdicts.
"""
