"""The edge without HTTP: the commands, policy sources, the watches, quota counters and strict
Leases, against the in-process fake API server where a cluster is needed."""
