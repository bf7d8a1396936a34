"""The compatibility lane: the oldest Kubernetes release we support (1.34), for installing,
device-plugin GPU pods and dry runs; the rest of the e2e suite runs on the newest release."""
