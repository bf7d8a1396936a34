"""The engine, through its API: what it decides for pods, policies and workloads."""
