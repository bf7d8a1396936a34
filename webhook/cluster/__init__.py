"""The Kubernetes API, by concern; folders are layers (pyproject.toml's import contracts):

    wiring.py   a replica's part of the cluster built whole (ConnectedReplica: every watch and
                background part, who reacts to what, started and stopped in order) and how
                it reaches the cluster beyond its watches (cluster_link)
    live.py     one replica's view of its cluster (LiveCluster): the cluster as the engine sees
                it (namespace labels, ResourceQuotas, DRA claims, free capacity) and its quota
                counters, with the quota lines the metrics show
    audit/      the background audit: its runs, and reading pods and writing PolicyReports
    quota/      quota usage from pods with local reservations, strict quotas' shared Leases and
                this replica's shares of them, reading them back (`quota`), their metrics
    watches/    the list/watch loop, and what each watch keeps: namespaces, ResourceQuotas,
                DRA claims, node capacity, the namespaces policy ConfigMaps may come from
    api/        writing to the API server as this replica: its name and client, leadership,
                status Events and annotations on policy ConfigMaps

May import: the engine (through policies/__init__), sources (the policy store it feeds),
metrics and logs. Never serving.
"""
