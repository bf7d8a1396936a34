"""The Kubernetes API: the list/watch loop (listwatch.py, watch_stream.py), the watches one
replica runs and how they are wired (watches.py), namespace labels and ResourceQuotas
(namespaces.py), what DRA claims can allocate (claims.py), quota usage and free capacity from
pods and nodes (usage.py) with local reservations (reservations.py), strict quotas' shared
Leases (shared_quota.py), status Events and annotations on policy ConfigMaps (policy_status.py)
written by one replica at a time (leadership.py), this replica's name on everything it writes
(identity.py), and the cluster as the engine sees it (live.py).

May import: the engine, sources (the policy store it feeds), metrics and logs. Never serving.
"""
