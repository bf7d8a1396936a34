"""The shared Leases of `consistency: strict` quotas: reservations and shares in them, turns at
them and requests for shares back (shared_quota.py), each Lease as this replica keeps what it
read and wrote and what its watch shows (ledger_leases.py), on the wire: read, written and the
expired ones deleted (lease_wire.py), and their entries as stored (lease_entries.py).

Layers, top to bottom: shared_quota; ledger_leases; lease_wire; lease_entries."""
