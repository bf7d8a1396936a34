"""GPUPolicy objects on the real control plane (#41): the CRD deploy/base installs, its schema as
the API server's own first check (`kubectl apply` refuses unknown fields and wrong types before
anything else sees them), the webhook's verdict as the second (the same as a policy ConfigMap's),
and the load result on the object's status, shown by `kubectl get gpupolicies` and waited on
with `kubectl wait --for=condition=Ready`. A broken object that got in while no replica answered
keeps its last good version, from its status, in a replica started afresh; one that never loaded
fails closed."""

from __future__ import annotations

import yaml

from tests.e2e.harness import Installation, pod, policy_configmap, wait_for
from tests.e2e.install import ROOT

NAMESPACE = "gpupolicy-team"
CAPPED = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-object-cap
spec:
  priority: 5
  match:
    namespaces: [gpupolicy-team]
  quota:
    perPod:
      gpus: 0
"""


def release_gpus(installation: Installation, namespace: str) -> None:
    """The pods a case made, gone at once: without a kubelet a bound pod's GPU stays taken."""
    installation.kubectl.run("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force")


def ready_of(installation: Installation, name: str) -> dict[str, object]:
    found = installation.kubectl.get("gpupolicy", name)
    status = found.get("status") or {}
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


def test_a_gpupolicy_object_is_checked_twice_at_apply_and_says_how_it_loaded(installation: Installation):
    kubectl = installation.kubectl
    kubectl.run("create", "namespace", NAMESPACE)
    # The API server's schema: an unknown field and a wrong type, refused before the webhook.
    unknown = kubectl.apply(CAPPED.replace("  priority: 5", "  priority: 5\n  prority: 6"), check=False)
    assert unknown.code != 0 and 'unknown field "spec.prority"' in unknown.stderr
    wrong = kubectl.apply(CAPPED.replace("priority: 5", "priority: high"), check=False)
    assert wrong.code != 0 and "spec.priority" in wrong.stderr
    # The webhook's: what only the loader knows (CEL that does not compile), as for a ConfigMap.
    cel = CAPPED + '  rules:\n    - name: bad\n      expression: "object.metadata.("\n'
    refused = kubectl.apply(cel, check=False)
    assert refused.code != 0 and "policy rejected" in refused.stderr and "spec.rules[0].expression" in refused.stderr
    server_dry = kubectl.apply(cel, "--dry-run=server", check=False)
    assert server_dry.code != 0 and "policy rejected" in server_dry.stderr

    kubectl.apply(CAPPED)
    kubectl.run("wait", "--for=condition=Ready", "gpupolicy/e2e-object-cap", "--timeout=60s")
    table = kubectl.run("get", "gpupolicies").stdout
    header, *rows = table.splitlines()
    assert header.split()[:4] == ["NAME", "READY", "IN", "FORCE"]
    assert any(row.split()[:3] == ["e2e-object-cap", "True", "current"] for row in rows), table
    refused = kubectl.create(pod("whole", NAMESPACE, gpus=1), check=False)
    assert refused.code != 0 and "e2e-object-cap" in refused.stderr
    assert "lastGood" in kubectl.get("gpupolicy", "e2e-object-cap")["status"]

    kubectl.run("delete", "gpupolicy", "e2e-object-cap")
    wait_for(lambda: kubectl.create(pod("whole", NAMESPACE, gpus=1), check=False).code == 0, "the cap removed")
    release_gpus(installation, NAMESPACE)


def test_a_policy_moves_from_a_configmap_to_an_object_with_no_moment_without_it(installation: Installation):
    kubectl = installation.kubectl
    namespace = "gpupolicy-moving"
    kubectl.run("create", "namespace", namespace)
    capped = CAPPED.replace("gpupolicy-team", namespace).replace("e2e-object-cap", "e2e-moving")
    kubectl.apply(policy_configmap("e2e-moving", capped))
    wait_for(lambda: kubectl.create(pod("whole", namespace, gpus=1), check=False).code != 0, "the ConfigMap's cap")
    applied = kubectl.apply(capped)
    assert "duplicate policy name" in applied.stderr and "takes over once that one is gone" in applied.stderr
    wait_for(lambda: ready_of(installation, "e2e-moving").get("reason") == "NameHeldElsewhere", "the object to wait")
    kubectl.run("delete", "configmap", "e2e-moving", "-n", "gpu-admission")
    wait_for(lambda: ready_of(installation, "e2e-moving").get("status") == "True", "the object to take over")
    refused = kubectl.create(pod("whole", namespace, gpus=1), check=False)
    assert refused.code != 0 and "e2e-moving" in refused.stderr
    kubectl.run("delete", "gpupolicy", "e2e-moving")


def test_a_broken_gpupolicy_from_an_outage_keeps_its_last_good_version_or_fails_closed(installation: Installation):
    kubectl = installation.kubectl
    namespace = "gpupolicy-outage"
    kubectl.run("create", "namespace", namespace)
    capped = CAPPED.replace("gpupolicy-team", namespace).replace("e2e-object-cap", "e2e-outage-cap")
    never = capped.replace("e2e-outage-cap", "e2e-outage-never").replace("gpus: 0", "gpus: 1")
    kubectl.apply(capped)
    wait_for(lambda: ready_of(installation, "e2e-outage-cap").get("status") == "True", "the cap to load")
    wait_for(
        lambda: "lastGood" in (kubectl.get("gpupolicy", "e2e-outage-cap").get("status") or {}),
        "its last good version kept on its status",
    )
    broken_rule = '  rules:\n    - name: bad\n      expression: "object.("\n'
    for replica in installation.replicas:
        replica.stop()
    try:
        # Nobody answers validate-gpupolicies (Ignore): both broken objects are stored.
        kubectl.apply(capped + broken_rule)
        kubectl.apply(never + broken_rule)
        back = installation.replica("gpu-admission-0")  # a fresh process: nothing kept in memory
        back.wait_ready()
        refused = kubectl.create(pod("whole", namespace, gpus=1), check=False)
        assert refused.code != 0
        assert "policy e2e-outage-never is out of force" in refused.stderr
        wait_for(
            lambda: ready_of(installation, "e2e-outage-cap").get("reason") == "LastGoodInForce",
            "the broken cap to say its last good version is in force",
        )
        assert kubectl.get("gpupolicy", "e2e-outage-cap")["status"]["inForce"] == "lastGood"
        wait_for(
            lambda: ready_of(installation, "e2e-outage-never").get("reason") == "OutOfForce",
            "the policy that never loaded to say it fails closed",
        )
        message = str(ready_of(installation, "e2e-outage-never").get("message"))
        assert "spec.rules[0].expression" in message
    finally:
        kubectl.run("delete", "gpupolicy", "e2e-outage-never", "e2e-outage-cap", "--ignore-not-found")
    wait_for(lambda: kubectl.create(pod("whole", namespace, gpus=1), check=False).code == 0, "both removed")
    release_gpus(installation, namespace)


def test_every_shipped_policy_document_applies_as_a_gpupolicy_object(installation: Installation):
    """The CRD's schema is converted from the JSON Schema the loader is held to: every GPUPolicy
    document we ship (the embedded default, the examples) passes the API server's schema check and
    the webhook's verdict as an object, at `kubectl apply --dry-run=server`."""
    files = [ROOT / "policies/bundled/default.yaml", *sorted((ROOT / "examples/policies").glob("*.yaml"))]
    documents = [d for f in files for d in yaml.safe_load_all(f.read_text()) if d and d.get("kind") == "GPUPolicy"]
    assert len(documents) >= 5
    for document in documents:
        document["metadata"]["name"] = f"e2e-dry-{document['metadata']['name']}"  # names the ConfigMaps hold
        done = installation.kubectl.apply(yaml.safe_dump(document), "--dry-run=server", check=False)
        assert done.code == 0, (document["metadata"]["name"], done.stderr)
