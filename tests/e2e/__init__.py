"""End-to-end tests: gpu-admission installed into a real control plane started by the suite."""
