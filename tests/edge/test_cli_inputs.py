"""`mutate` and `validate` take manifests as people have them: helm and kustomize output, mixed
kinds, directories, stdin, documents without a namespace, custom resources."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from webhook.cli.main import main

CORPUS = Path(__file__).parents[1] / "corpus"
EXAMPLES = Path(__file__).parents[2] / "examples" / "policies"
SLICES = str(EXAMPLES / "slices-everywhere.yaml")

MIXED = """
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer}
spec:
  replicas: 2
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer, team: a}}
    spec:
      containers:
        - {name: main, image: vllm, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
"""


@pytest.fixture
def mixed(tmp_path):
    path = tmp_path / "chart.yaml"
    path.write_text(MIXED)
    return path


def test_other_kinds_are_passed_through_and_listed_not_fatal(mixed, capsys):
    assert main(["mutate", "-f", str(mixed), "--policies", SLICES]) == 0
    out, err = capsys.readouterr()
    documents = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in documents] == [
        "Service",
        "PersistentVolumeClaim",
        "Deployment",
        "CustomResourceDefinition",
    ]
    assert documents[0] == yaml.safe_load(MIXED.split("---")[0])
    template = documents[2]["spec"]["template"]["spec"]["containers"][0]
    assert template["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert "skipped 3" in err and "Service web" in err and "CustomResourceDefinition" in err


def test_validate_judges_what_it_can_and_lists_the_rest(mixed, capsys):
    assert main(["validate", "-f", str(mixed), "--policies", SLICES]) == 0
    out, err = capsys.readouterr()
    assert "(Deployment infer): allowed" in out and "skipped 3" in err


def test_a_directory_is_read_recursively_and_stdin_as_dash(tmp_path, mixed, capsys, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pod.json").write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
            }
        )
    )
    assert main(["validate", "-f", str(tmp_path), "-o", "json"]) == 0
    judged = [r["object"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert any("Deployment infer" in o for o in judged) and any("Pod p" in o for o in judged)
    monkeypatch.setattr(sys, "stdin", io.StringIO(MIXED))
    assert main(["validate", "-f", "-"]) == 0
    assert "(Deployment infer)" in capsys.readouterr().out


def test_documents_without_a_namespace_are_judged_in_the_given_one_and_printed_without_it(mixed, capsys):
    assert (
        main(["validate", "-f", str(mixed), "--policies", str(EXAMPLES / "training-quota.yaml"), "-n", "team-a"]) == 0
    )
    out = capsys.readouterr().out
    assert "team-a/infer" in out or "(Deployment infer): allowed" in out
    assert main(["validate", "-f", str(CORPUS / "pod-gpu-operator-test.yaml"), "--policies", SLICES]) == 0
    out = capsys.readouterr().out
    assert "Pod default/" in out and ": :" not in out
    assert main(["mutate", "-f", str(mixed), "-n", "team-a"]) == 0
    assert "namespace" not in capsys.readouterr().out


def test_mutate_with_cluster_state_agrees_with_validate(tmp_path, capsys):
    state = tmp_path / "cluster.yaml"
    state.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Namespace, metadata: {name: ml, labels: {gpu-admission.io/mig: default}}}\n"
    )
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n"
        "spec: {containers: [{name: a, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
    )
    assert main(["mutate", "-f", str(pod), "--cluster-state", str(state), "-o", "json"]) == 0
    mutated = json.loads(capsys.readouterr().out)
    assert mutated["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert main(["validate", "-f", str(pod), "--cluster-state", str(state), "-o", "json"]) == 0
    changes = json.loads(capsys.readouterr().out)["results"][0]["changes"]
    assert any("nvidia.com/mig-1g.10gb" in c["change"] for c in changes)
    assert main(["mutate", "-f", str(pod), "-o", "json"]) == 0  # without it: no namespace label, no slice
    assert "mig-1g.10gb" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "manifest, template_path",
    [
        ("pytorchjob-mnist-nccl.yaml", "spec.pytorchReplicaSpecs.Master.template"),
        ("mpijob-nccl-tests.yaml", "spec.mpiReplicaSpecs.Worker.template"),
        ("rayservice-vllm.yaml", "spec.rayClusterConfig.workerGroupSpecs[0].template"),
        ("leaderworkerset-vllm.yaml", "spec.leaderWorkerTemplate.leaderTemplate"),
        ("jobset-pytorch-gpu.yaml", "spec.replicatedJobs[0].template.spec.template"),
    ],
)
def test_custom_resources_are_judged_by_each_template_named_by_its_path(manifest, template_path, capsys):
    code = main(["validate", "-f", str(CORPUS / manifest), "--policies", SLICES, "-o", "json"])
    result = json.loads(capsys.readouterr().out)["results"][0]
    paths = [c["path"] for c in result["changes"]] + [v["path"] for v in result["verdicts"]]
    assert any(template_path in p for p in paths), paths
    assert code in (0, 1)


def test_a_workload_kind_in_policy_files_teaches_a_new_kind(tmp_path, capsys):
    policies = tmp_path / "p.yaml"
    policies.write_text(
        Path(SLICES).read_text()
        + "\n---\napiVersion: gpu-admission.io/v1alpha1\nkind: WorkloadKind\nmetadata: {name: trainjob}\n"
        "spec:\n  group: trainer.kubeflow.org\n  kind: TrainJob\n  resource: trainjobs\n"
        "  templates: [{path: spec.podTemplate, replicas: [spec.numNodes]}]\n"
    )
    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: t, labels: {team: a}}\n"
        "spec:\n  numNodes: 40\n  podTemplate:\n    metadata: {labels: {team: a}}\n"
        "    spec: {containers: [{name: a, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
    )
    assert main(["validate", "-f", str(job), "--policies", str(policies)]) == 0
    out = capsys.readouterr().out
    assert "spec.podTemplate" in out and "40 replicas" in out


def test_warnings_are_printed_whole(tmp_path, capsys):
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {gpu-admission.io/triton: inject}}\n"
        "spec: {containers: [{name: a, image: x}]}\n"
    )
    assert main(["mutate", "-f", str(pod)]) == 0
    err = capsys.readouterr().err
    warning = next(line for line in err.splitlines() if line.startswith("Warning"))
    assert len(warning) > 120 and "…" not in warning


def test_piping_into_head_ends_quietly():
    done = subprocess.run(
        f"{sys.executable} -m webhook.cli mutate -f {CORPUS} --policies {SLICES} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert "BrokenPipe" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["mutate", "validate", "lint", "test"])
def test_help_describes_the_command_and_its_exit_codes(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "exit codes:" in out and len(out.splitlines()) > 8


def test_certs_generate_refuses_to_write_keys_into_a_python_package(capsys):
    package = Path(__file__).parents[2] / "certs"
    assert main(["certs", "generate", "--service", "s", "--namespace", "n", "--out", str(package)]) == 2
    assert "is a Python package" in capsys.readouterr().err
    assert not (package / "tls.key").exists()


def test_private_keys_are_ignored_by_git_and_docker():
    root = Path(__file__).parents[2]
    assert "*.key" in (root / ".gitignore").read_text().split()
    assert "**/*.key" in (root / ".dockerignore").read_text().split()
