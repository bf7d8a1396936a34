"""`mutate -f` and `validate -f` judge only what the shipped webhooks would be sent: the same
description the webhook configurations are rendered from (policies.native.webhook_scope), its
excluded namespaces, rules, objectSelector and matchConditions evaluated with the same CEL host.
What the cluster would never send is listed as skipped, with the reason; a claim template of the
same input is known to the workloads after it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from webhook.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
SLICES = str(EXAMPLES / "slices-everywhere.yaml")

AMD_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: rocm, namespace: ml}
spec:
  containers: [{name: main, image: rocm, resources: {limits: {amd.com/gpu: 1}}}]
"""
# NVIDIA's static device-plugin DaemonSet (k8s-device-plugin's nvidia-device-plugin.yml), trimmed.
DEVICE_PLUGIN = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-device-plugin-daemonset, namespace: kube-system}
spec:
  selector: {matchLabels: {name: nvidia-device-plugin-ds}}
  template:
    metadata: {labels: {name: nvidia-device-plugin-ds}}
    spec:
      containers:
        - name: nvidia-device-plugin-ctr
          image: nvcr.io/nvidia/k8s-device-plugin:v0.18.0
          volumeMounts: [{name: device-plugin, mountPath: /var/lib/kubelet/device-plugins}]
      volumes: [{name: device-plugin, hostPath: {path: /var/lib/kubelet/device-plugins}}]
"""
NAMESPACES = """\
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: debugging, labels: {resource.kubernetes.io/admin-access: "true"}}
"""
TEMPLATE_AND_DEPLOYMENT = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-gpus, namespace: ml}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer, namespace: ml}
spec:
  replicas: 3
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}}
    spec:
      resourceClaims: [{name: gpus, resourceClaimTemplateName: two-gpus}]
      containers: [{name: main, image: vllm, resources: {claims: [{name: gpus}]}}]
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    return str(path)


def test_mutate_leaves_a_pod_the_mutating_webhook_is_never_sent_as_it_came(tmp_path, capsys):
    assert main(["mutate", "-f", write(tmp_path, AMD_POD), "--policies", SLICES]) == 0
    out, err = capsys.readouterr()
    assert yaml.safe_load(out) == yaml.safe_load(AMD_POD)  # no nvidia.com/gpu toleration
    assert "skipped 1 (the shipped webhooks' matchConditions leave it out" in err and "Pod rocm" in err


def test_validate_skips_what_an_excluded_namespace_holds(tmp_path, capsys):
    assert main(["validate", "-f", write(tmp_path, DEVICE_PLUGIN)]) == 0
    _, err = capsys.readouterr()
    assert "skipped 1 (namespace kube-system is excluded by the shipped webhooks)" in err
    assert "0 judged" in err


def test_a_namespace_is_judged_only_where_the_webhook_is_sent_it(tmp_path, capsys):
    main(["validate", "-f", write(tmp_path, NAMESPACES), "-o", "json"])
    out, err = capsys.readouterr()
    judged = [r["object"] for r in json.loads(out)["results"]]
    assert len(judged) == 1 and "debugging" in judged[0]
    assert "labelled-for-admin-access" in err and "Namespace team-a" in err


def test_other_kinds_are_listed_as_skipped_with_why(tmp_path, capsys):
    service = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n"
    assert main(["validate", "-f", write(tmp_path, service)]) == 0
    assert "skipped 1 (not a kind gpu-admission judges): " in capsys.readouterr().err


QUOTA = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: ml-quota}
spec:
  match: {namespaces: [ml]}
  quota: {limits: {gpus: 4}}
"""


def test_a_claim_template_of_the_same_input_is_known_to_the_workloads_after_it(tmp_path, capsys):
    policies = tmp_path / "quota.yaml"
    policies.write_text(QUOTA)
    main(["validate", "-f", write(tmp_path, TEMPLATE_AND_DEPLOYMENT), "--policies", str(policies), "-o", "json"])
    results = json.loads(capsys.readouterr().out)["results"]
    deployment = next(r for r in results if "Deployment" in r["object"])
    told = [v["message"] for v in deployment["verdicts"]]
    assert not any("not known here" in m for m in told), told
    assert any("3 replicas would hold gpus 0 + 3x2 = 6, over 4" in m for m in told), told


GANG = """\
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: gang, namespace: ml}
spec:
  schedulingPolicy: {basic: {}}
  resourceClaims: [{name: gpus, resourceClaimTemplateName: two-gpus}]
"""


def test_a_pod_group_of_the_same_input_shares_its_claim_with_its_pods_after_it(tmp_path, capsys):
    """No webhook of ours is sent a PodGroup, but the pods of the group after it share its claim:
    three replicas of the gang hold 2 GPUs, not 6."""
    policies = tmp_path / "quota.yaml"
    policies.write_text(QUOTA)
    gang = TEMPLATE_AND_DEPLOYMENT.replace(
        "      resourceClaims:", "      schedulingGroup: {podGroupName: gang}\n      resourceClaims:"
    )
    main(["validate", "-f", write(tmp_path, GANG + "---\n" + gang), "--policies", str(policies), "-o", "json"])
    out, err = capsys.readouterr()
    deployment = next(r for r in json.loads(out)["results"] if "Deployment" in r["object"])
    assert not [v["message"] for v in deployment["verdicts"]]
    assert "PodGroup gang" in err  # listed as skipped, as every kind no webhook is sent


def test_a_pod_group_of_the_cluster_state_shares_its_claim_with_its_running_pods(tmp_path, capsys):
    running = """\
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: ml}
spec:
  nodeName: node-1
  schedulingGroup: {podGroupName: gang}
  resourceClaims: [{name: gpus, resourceClaimTemplateName: two-gpus}]
  containers: [{name: main, image: vllm, resources: {claims: [{name: gpus}]}}]
status: {phase: Running}
"""
    template = TEMPLATE_AND_DEPLOYMENT.split("---")[0]
    state = tmp_path / "state.yaml"
    state.write_text("---\n".join([template, GANG, running, running.replace("name: a,", "name: b,")]))
    policies = tmp_path / "quota.yaml"
    policies.write_text(QUOTA.replace("gpus: 4", "gpus: 3"))
    third = (
        running.replace("name: a,", "name: c,")
        .replace("  nodeName: node-1\n", "")
        .replace("status: {phase: Running}\n", "")
    )
    code = main(["validate", "-f", write(tmp_path, third), "--policies", str(policies), "--cluster-state", str(state)])
    assert code == 0, capsys.readouterr()
