"""NVIDIA's GPUs and where pods may land on them.

    models.py     the MIG-capable models, their profiles, and how the device plugin and GPU
                  Feature Discovery name them (resources, node labels): pure data
    devices.py    how a container reaches devices past the device plugin (env, hostPath, CDI)
    claims.py     what a DRA ResourceClaim can allocate of NVIDIA's GPUs, as resource names
    catalog.py    lookups over the models; what a node label offers (NodeKind), what an
                  nvidia.com/ resource is (GpuResource)
    capacity.py   free slices and GPUs per model and profile, as the cluster reports them
    placement.py  the node kinds a pod's constraints admit, and what each resource costs there
    choices.py    what a policy allows a whole-GPU container, from its annotations alone
    gate.py       one gate for every GPU resource a container names; where a pod must be pinned
    mig.py        the MIG plan of a pod: rewrites, problems, the pin

Layers, bottom up: models and devices, catalog and claims, capacity and placement (below the policy model
and the pod: they know neither); gate and choices, then mig (which read policies and pods).
"""
