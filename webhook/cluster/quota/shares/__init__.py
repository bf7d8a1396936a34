"""This replica's shares of strict budgets: granted and written again (share_writers.py: `refill`
and the ShareKeeper thread) and held (escrow.py), so most admissions take from a share instead of
writing the budget's Lease.

Layers, top to bottom: share_writers; escrow."""
