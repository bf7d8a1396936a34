"""The chart installed with a real helm (3.19, built from its Go module) into a cluster where
another tool (Kyverno, Policy Reporter) already owns the PolicyReport CRDs (#41): `helm install
--dry-run` failed there on "invalid ownership metadata". Now a dry run, an install, an upgrade and
an uninstall all go through, never touch the other tool's CRDs, and leave the GPUPolicy CRD (and
the policies in it) in place on uninstall."""

from __future__ import annotations

import yaml

from tests.e2e.install import ROOT
from tests.e2e.kubectl import Kubectl

CHART = str(ROOT / "charts" / "gpu-admission")
RELEASE = ("gpu-admission", CHART, "-n", "gpu-admission")
POLICYREPORT_CRDS = ROOT / "deploy/components/policyreport-crds/policyreport-crds.yaml"
OTHER_TOOL = {"app.kubernetes.io/managed-by": "kyverno"}


def another_tools_crds() -> str:
    documents = [d for d in yaml.safe_load_all(POLICYREPORT_CRDS.read_text()) if d]
    for crd in documents:
        crd["metadata"]["labels"] = OTHER_TOOL
    return "\n---\n".join(yaml.safe_dump(d) for d in documents)


def owners(kubectl: Kubectl, name: str) -> tuple[dict[str, str], dict[str, str]]:
    metadata = kubectl.get("crd", name)["metadata"]
    return metadata.get("labels") or {}, metadata.get("annotations") or {}


def test_install_upgrade_and_uninstall_beside_another_tools_policyreport_crds(helm: Kubectl, kubectl: Kubectl):
    kubectl.apply(another_tools_crds())
    for dry_run in ("--dry-run", "--dry-run=client", "--dry-run=server"):
        done = helm.run("install", *RELEASE, "--create-namespace", dry_run, check=False, timeout=120)
        assert done.code == 0, (dry_run, done.stderr)
        manifest = done.stdout.partition("MANIFEST:")[2].partition("\nNOTES:")[0]
        rendered = [d for d in yaml.safe_load_all(manifest) if d]
        names = [d["metadata"]["name"] for d in rendered if d.get("kind") == "CustomResourceDefinition"]
        assert "policyreports.wgpolicyk8s.io" not in names, (dry_run, names)  # the other tool's stay its own
        assert "gpupolicies.gpu-admission.io" in names, (dry_run, names)
    installed = helm.run("install", *RELEASE, "--create-namespace", check=False, timeout=180)
    assert installed.code == 0, installed.stderr
    labels, annotations = owners(kubectl, "policyreports.wgpolicyk8s.io")
    assert labels == OTHER_TOOL and "meta.helm.sh/release-name" not in annotations
    labels, annotations = owners(kubectl, "gpupolicies.gpu-admission.io")
    assert annotations["meta.helm.sh/release-name"] == "gpu-admission"
    assert annotations["helm.sh/resource-policy"] == "keep"
    assert kubectl.run("get", "gpupolicies").code == 0
    upgraded = helm.run("upgrade", *RELEASE, "--set", "replicas=2", check=False, timeout=180)
    assert upgraded.code == 0, upgraded.stderr
    assert owners(kubectl, "policyreports.wgpolicyk8s.io")[0] == OTHER_TOOL
    removed = helm.run("uninstall", "gpu-admission", "-n", "gpu-admission", check=False, timeout=180)
    assert removed.code == 0, removed.stderr
    assert kubectl.get("crd", "gpupolicies.gpu-admission.io")["metadata"]["name"]  # kept
    assert owners(kubectl, "policyreports.wgpolicyk8s.io")[0] == OTHER_TOOL
