"""On the oldest Kubernetes release we support (1.34): gpu-admission installs as shipped, GPU pods
of the device plugin are rewritten into MIG slices and bound where the slice is, and
`--dry-run=server` gives the same verdicts while writing nothing."""

from __future__ import annotations

import json

import pytest

from tests.e2e.controlplane.build import OLDEST_VERSION
from tests.e2e.harness import Installation, pod, policy_configmap, wait_for, wait_rewritten
from tests.e2e.kubectl import Kubectl
from tests.e2e.policies import QUOTA, TEAMS

MIXED_NODES = {"h100-mixed", "a100-mixed"}


@pytest.fixture(scope="module")
def cluster(installation: Installation) -> Kubectl:
    kubectl = installation.kubectl
    kubectl.apply(policy_configmap("e2e-teams", TEAMS))
    kubectl.apply(policy_configmap("e2e-quota", QUOTA.format(limit=1)))
    for namespace in ("team-old", "quota-old"):
        kubectl.run("create", "namespace", namespace)
    wait_rewritten(kubectl, pod("probe", "quota-old", gpus=1), "the e2e policies to be loaded")
    return kubectl


def test_the_lane_runs_the_oldest_supported_release(cluster: Kubectl):
    version = json.loads(cluster.run("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    assert version == OLDEST_VERSION


def test_installed_as_shipped_and_ready(installation: Installation):
    assert installation.before_ready["plain"].code == 0, installation.before_ready["plain"].stderr
    assert all(replica.ready() for replica in installation.replicas)


def test_a_device_plugin_gpu_pod_is_stored_with_its_mig_slice_and_bound_where_the_slice_is(cluster: Kubectl):
    annotations = {"gpu-admission.io/mig-profile": "1g.10gb"}
    cluster.create(pod("slice", "team-old", gpus=1, annotations=annotations, labels={"team": "a"}))
    stored = cluster.get("pod", "slice", "-n", "team-old")
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    node = wait_for(lambda: cluster.get("pod", "slice", "-n", "team-old")["spec"].get("nodeName"), "the pod bound")
    assert node in MIXED_NODES


def test_a_dry_run_is_denied_as_the_create_is_and_writes_nothing(cluster: Kubectl):
    cluster.create(pod("holder", "quota-old", gpus=1))  # the budget of one GPU-equivalent, full
    dry = cluster.create(pod("over", "quota-old", gpus=1), "--dry-run=server", check=False)
    real = cluster.create(pod("over", "quota-old", gpus=1), check=False)
    assert dry.code != 0 and real.code != 0
    reason = lambda text: text.split("denied the request:", 1)[-1].strip()  # noqa: E731
    assert reason(dry.stderr) == reason(real.stderr) and "exceeds" in reason(dry.stderr)
    assert cluster.run("get", "pod", "over", "-n", "quota-old", check=False).code != 0


def test_an_allowed_dry_run_shows_the_rewrite_and_stores_nothing(cluster: Kubectl):
    shown = json.loads(
        cluster.create(pod("dry", "team-old", gpus=1, labels={"team": "a"}), "--dry-run=server", "-o", "json").stdout
    )
    assert shown["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert cluster.run("get", "pod", "dry", "-n", "team-old", check=False).code != 0


def test_a_claim_spelled_to_look_like_another_driver_is_refused_on_the_oldest_release(cluster: Kubectl):
    """DRA's resource.k8s.io/v1 is 1.34's: the API server stores a selector whose profile is
    spelled with an escape, and the claim webhook reads it as the scheduler does: a 1g.5gb slice,
    which no model of the quota-old policy (A100-80GB, H100-80GB) has."""
    selector = "device.attributes['gpu.nvidia.com'].profile == '1g.\\x35gb'"
    request = {"deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": selector}}]}
    spec = {"devices": {"requests": [{"name": "r0", "exactly": request}]}}
    made = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "escaped", "namespace": "quota-old"},
        "spec": spec,
    }
    result = cluster.create(json.dumps(made), check=False)
    assert result.code != 0
    assert 'admission webhook "validate-claims.gpu-admission.io" denied the request' in result.stderr
    assert "profile 1g.5gb is not a profile of A100-80GB, H100-80GB" in result.stderr
    assert "ResourceClaim quota-old/escaped" in result.stderr
