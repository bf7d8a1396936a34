"""What a review brings, as the engine reads it: the shared vocabulary of every layer above.

    document.py   JSON, and the copy-on-write Draft that records its RFC 6902 patch
    containers.py a container's GPU requests and device access, as read (ContainerView)
    pod.py        a Pod or pod template as read (PodView): containers, placement, claims
    request.py    what the API server says of the request (RequestInfo): namespace, operation,
                  user, old object; and what CEL sees of it
    cluster.py    what may be known of the cluster (ClusterState): namespace labels, free
                  capacity, ResourceQuotas, DRA claims, the claims PodGroups share

Layers, bottom up: document and containers; pod; request and cluster. Above the policy model
(request.py builds CEL's input) and the GPUs; below planning.
"""
