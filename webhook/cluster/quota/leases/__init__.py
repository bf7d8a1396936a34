"""The shared Leases of `consistency: strict` quotas: reservations and shares in them, turns at
them and requests for shares back (shared_quota.py), each Lease as this replica reads, writes and
watches it (ledger_leases.py), and their entries as stored (lease_entries.py).

Layers, top to bottom: shared_quota; ledger_leases; ledger."""
