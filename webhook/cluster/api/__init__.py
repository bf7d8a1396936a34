"""Writing to the API server as this replica: its name and API client (identity.py), one writer
at a time (leadership.py), status Events and annotations on policy ConfigMaps
(policy_status.py)."""
