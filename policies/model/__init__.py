"""Policies as the engine holds them: the GPUPolicy model (policy.py), typed field reads with a
line for every problem (fields.py, yamldoc.py), the loader (loader.py), CEL compiled once
(cel.py, cel_fields.py), label selectors (selectors.py) and the compiled PolicySet (policyset.py).

May import: the GPU catalog (gpu.catalog), quantity, errors. Never pods, mutation or judgement:
a policy is loaded and checked without any pod in sight.
"""
