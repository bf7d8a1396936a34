"""Listing and watching: the list/watch loop with its stream reader (listwatch.py,
watch_stream.py), and what each watch keeps: namespace labels and ResourceQuotas
(namespaces.py), what DRA claims ask for (claims.py), the claims PodGroups make for all their
pods (pod_groups.py) and what DeviceClasses select (device_classes.py), free GPU capacity per node
(nodes.py), the namespaces policy ConfigMaps may come from (policy_namespaces.py)."""
