"""The webhook down: what the README promises (failurePolicy Fail on GPU pods, matchConditions
keeping every other pod away from it), through the real API server."""

from __future__ import annotations

from tests.e2e.harness import Installation, pod


def test_with_every_replica_down_plain_pods_are_created_and_gpu_pods_are_refused_until_one_is_back(
    installation: Installation,
):
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", "outage")
    for replica in installation.replicas:
        replica.stop()
    try:
        plain = kubectl.create(pod("plain", "outage", resources={"cpu": "100m"}), check=False)
        gpu = kubectl.create(pod("gpu", "outage", gpus=1), check=False)
        assert plain.code == 0, plain.stderr
        assert gpu.code != 0 and 'failed calling webhook "mutate.gpu-admission.io"' in gpu.stderr
    finally:
        installation.replica("gpu-admission-0").wait_ready()
    assert kubectl.create(pod("gpu", "outage", gpus=1)).code == 0
