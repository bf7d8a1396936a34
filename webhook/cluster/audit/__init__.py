"""The background audit: runs on the leader, in a child process (background_audit.py), and
reading the cluster's pods and nodes and writing PolicyReports and Events (audit_io.py)."""
