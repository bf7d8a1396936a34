"""NVIDIA's GPUs and where pods may land on them; no policies and no pods (those layers are above).

    models.py     the MIG-capable models, their profiles, and how the device plugin and GPU
                  Feature Discovery name them (resources, node labels): pure data
    cloud.py      how cloud providers label GPU nodes (GKE, EKS, AKS, OCI)
    devices.py    how a container reaches devices past the device plugin (env, hostPath, CDI)
    device_cel.py DRA device selectors as the scheduler evaluates them (CEL over one device), and
                  what their checked tree proves where no device is shown
    device_shares.py  consumable capacity: the share of a shared device a request takes
    device_classes.py  a DRA DeviceClass: its selectors, compiled, and the extended resource it serves
    catalog.py    lookups over the models; what a node label offers (NodeKind), what an
                  nvidia.com/ resource is (GpuResource)
    dra_devices.py  the devices NVIDIA's DRA driver publishes in ResourceSlices, every model, as
                  charging needs them (DeviceKind)
    device_reach.py  what a request's selectors reach of the shown devices (Reach)
    driver_config.py  a claim's driver configuration: NVIDIA's own read (sharing, passthrough), others opaque
    claims.py     what a DRA ResourceClaim asks for, and what each request can allocate under the
                  cluster's classes and devices
    capacity.py   free slices and GPUs per model and profile, as the cluster reports them
    placement.py  the node kinds a pod's constraints admit, and what each resource costs there
    dra_inventory.py  the DRA devices by slice, minus allocated claims and tainted devices: free
                  capacity beside the labels', and what selectors reach

Layers, bottom up: models, cloud and devices; device CEL and shares; catalog and device classes;
DRA devices; reach and driver configurations; claims; capacity and placement; the DRA inventory.
"""
