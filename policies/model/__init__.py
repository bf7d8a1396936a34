"""Policies as the engine holds them: the GPUPolicy model (policy.py), typed field reads with a
line for every problem (fields.py, yamldoc.py), the loader and its section readers (loader.py,
sections.py), CEL compiled once
(cel.py, cel_fields.py), label selectors (selectors.py) and the compiled PolicySet (policyset.py).

May import: the GPU catalog, models and device conventions (gpu.catalog, gpu.models,
gpu.devices), quantity, errors. Never pods, mutation or judgement:
a policy is loaded and checked without any pod in sight.
"""
