"""The pods a replica counts (pod_counting.py: counters per (policy, scope) fed by the pod watch,
under the counters' lock) and the reservations of pods admitted but not seen yet
(reservations.py). The bottom layer of quota: it knows nothing of Leases or shares.

Layers, top to bottom: pod_counting; reservations."""
