"""No policy lapses silently, on the real control plane (#41). validate-policies is failurePolicy
Ignore (a first `kubectl apply -k` ships webhook and policies together), so a broken policy
ConfigMap gets in while no replica answers. Before, a replica restarted after that had no last
good version: the team's caps were gone, its pods admitted on whole GPUs, and only an Event said
so. Now the leader persists each ConfigMap's texts on it once they load, a fresh replica keeps
that version, and a policy with no version at all fails closed, naming itself."""

from __future__ import annotations

import ssl
import urllib.request

from tests.e2e.harness import Installation, pod, policy_configmap, wait_for

NAMESPACE = "lapse-team"
CAPPED = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-lapse
spec:
  match:
    namespaces: [lapse-team]
  quota:
    perPod:
      gpus: 0
"""
BROKEN = CAPPED.replace("gpus: 0", "gpus: none")
NEVER = CAPPED.replace("e2e-lapse", "e2e-never").replace("gpus: 0", "gpus: never")
LAST_GOOD = "gpu-admission.io/last-good"


def readyz(port: int) -> str:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", timeout=5, context=context) as answer:
        return str(answer.read().decode())


def test_a_broken_policy_applied_during_an_outage_neither_lapses_nor_passes_silently(installation: Installation):
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    kubectl.apply(policy_configmap("e2e-lapse", CAPPED))
    wait_for(
        lambda: (
            LAST_GOOD
            in (kubectl.get("configmap", "e2e-lapse", "-n", "gpu-admission")["metadata"].get("annotations") or {})
        ),
        "the leader to persist the loaded version",
    )
    assert kubectl.create(pod("whole", NAMESPACE, gpus=1), check=False).code != 0  # capped
    for replica in installation.replicas:
        replica.stop()
    try:
        # Nobody answers validate-policies (Ignore): both broken ConfigMaps are stored.
        kubectl.apply(policy_configmap("e2e-lapse", BROKEN))
        kubectl.apply(policy_configmap("e2e-never", NEVER))
        back = installation.replica("gpu-admission-0")  # a fresh process: nothing kept in memory
        back.wait_ready()
        refused = kubectl.create(pod("whole", NAMESPACE, gpus=1), check=False)
        assert refused.code != 0
        # The persisted caps are in force; the policy that never loaded fails closed, named.
        assert "per-pod cap" in refused.stderr or "out of force" in refused.stderr
        assert "policy e2e-never is out of force" in refused.stderr
        assert "out of force (failing closed): e2e-never" in readyz(back.port)
    finally:
        kubectl.run("delete", "configmap", "e2e-never", "-n", "gpu-admission", "--ignore-not-found")
        kubectl.apply(policy_configmap("e2e-lapse", CAPPED), check=False)
    wait_for(lambda: "out of force" not in readyz(back.port), "the policy that never loaded to be gone")
    refused = kubectl.create(pod("whole", NAMESPACE, gpus=1), check=False)
    assert refused.code != 0 and "per-pod cap" in refused.stderr
    kubectl.run("delete", "configmap", "e2e-lapse", "-n", "gpu-admission")
    wait_for(lambda: kubectl.create(pod("whole", NAMESPACE, gpus=1), check=False).code == 0, "the cap removed")
