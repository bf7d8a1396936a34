"""The pods a replica counts (pod_counting.py: counters per (policy, scope) fed by the pod watch,
read by the engine's policies.judge.pod_reading, and snapshots of budgets, under the counters'
lock, which it alone takes), what reservations and Lease entries add to a budget beyond the watch
(beyond_watch.py), and the reservations of pods admitted but not seen yet (reservations.py). The
bottom layer of quota: it knows nothing of Leases or shares but what it is handed.

Layers, top to bottom: pod_counting; beyond_watch; reservations."""
