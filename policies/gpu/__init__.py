"""NVIDIA's GPUs and where pods may land on them; no policies and no pods (those layers are above).

    models.py     the MIG-capable models, their profiles, and how the device plugin and GPU
                  Feature Discovery name them (resources, node labels): pure data
    cloud.py      how cloud providers label GPU nodes (GKE, EKS, AKS, OCI)
    devices.py    how a container reaches devices past the device plugin (env, hostPath, CDI)
    device_classes.py  what a DRA DeviceClass (and a request's selectors) can select of NVIDIA's
                  GPUs, and which extended resource a class serves
    device_shares.py  consumable capacity: the share of a shared device a request takes
    claims.py     what a DRA ResourceClaim asks for, and what that can allocate of NVIDIA's GPUs
                  under the cluster's classes, as resource names
    catalog.py    lookups over the models; what a node label offers (NodeKind), what an
                  nvidia.com/ resource is (GpuResource)
    capacity.py   free slices and GPUs per model and profile, as the cluster reports them
    placement.py  the node kinds a pod's constraints admit, and what each resource costs there
    dra_inventory.py  free capacity from DRA ResourceSlices minus allocated claims, beside the labels'

Layers, bottom up: models, cloud and devices; device classes; device shares; catalog and claims;
capacity and placement; the DRA inventory.
"""
