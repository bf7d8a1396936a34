"""The real control plane of the e2e suite: kube-apiserver, kube-controller-manager, kube-scheduler,
kubectl and etcd built from Kubernetes' and etcd's Go modules (build.py, go.mod derived by gomod.py),
cached by version outside the repository, and started on loopback (cluster.py)."""
