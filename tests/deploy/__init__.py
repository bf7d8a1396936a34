"""What ships: manifests, the chart, generated files, certificates, the kubectl plugin, the version."""
