"""NVIDIA's GPUs: the catalog of models, MIG profiles, resource names and node labels
(catalog.py), free capacity per model and profile as the cluster reports it (capacity.py), and
MIG planning, which profile each GPU container gets or why it cannot get one (mig.py).

catalog.py and capacity.py sit at the bottom of the engine and import nothing of it; mig.py
decides from a policy and a pod, so it sits above the model and the vocabulary, below mutate.
"""
