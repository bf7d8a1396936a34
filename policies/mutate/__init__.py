"""What the mutating webhook writes into a pod: the copy-on-write draft that records its RFC 6902
patch (document.py), the MIG rewrite of a plan (rewrite.py), runtime settings (runtime.py), the
Triton sidecar (triton.py), and the whole mutation with its record (mutation.py).

May import: gpu, model, the vocabulary. Never judge: mutation does not know about verdicts.
"""
