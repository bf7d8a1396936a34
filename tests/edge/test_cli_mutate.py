"""`gpu-admission mutate` as a user runs it."""

import json
import subprocess
import sys

import jsonpatch
import pytest
import yaml

from webhook.cli.main import main

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: train
  namespace: ml
  annotations: {gpu-admission.io/gpu-memory: 15Gi, gpu-admission.io/gpu-model: H100-80GB}
spec:
  containers:
    - name: main
      image: pytorch
      resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.fixture
def pod_file(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    return path


def test_mutate_prints_the_mutated_pod_as_yaml(pod_file, capsys):
    assert main(["mutate", "-f", str(pod_file)]) == 0
    out = yaml.safe_load(capsys.readouterr().out)
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.20gb": "1"}


def test_mutate_patch_output_applies_to_the_input(pod_file, capsys):
    assert main(["mutate", "-f", str(pod_file), "-o", "patch"]) == 0
    patch = json.loads(capsys.readouterr().out)
    assert any(op["path"] == "/spec/containers/0/resources/limits/nvidia.com~1gpu" for op in patch)
    patched = jsonpatch.apply_patch(yaml.safe_load(POD), patch)
    assert "nvidia.com/mig-1g.20gb" in patched["spec"]["containers"][0]["resources"]["requests"]


def test_mutate_reads_several_pods_from_stdin_as_json(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(POD + "\n---\n" + POD))
    assert main(["mutate", "-f", "-", "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["items"]) == 2


@pytest.mark.parametrize(
    "text, message",
    [
        ("a: [", "not valid YAML"),
        (
            POD.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: lots"),
            "spec.containers[0].resources.limits.nvidia.com/gpu",
        ),
        (
            "apiVersion: v1\nkind: Pod\nspec: {containers: [{image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}\n",
            "spec.containers[0].name",
        ),
    ],
    ids=["bad-yaml", "bad-quantity", "container-without-name"],
)
def test_bad_input_exits_2_with_a_message_naming_document_and_field(tmp_path, capsys, text, message):
    path = tmp_path / "in.yaml"
    path.write_text(text)
    assert main(["mutate", "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_missing_file_exits_2(capsys):
    assert main(["mutate", "-f", "/nonexistent.yaml"]) == 2
    assert "/nonexistent.yaml: no such file or directory" in capsys.readouterr().err


def test_a_bad_policy_directory_exits_2_naming_file_and_line(tmp_path, pod_file, capsys):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "bad.yaml").write_text(
        "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: x}\n"
        "spec:\n  mig:\n    defaultProfile: 1g.11gb\n"
    )
    assert main(["mutate", "-f", str(pod_file), "--policies", str(tmp_path / "p")]) == 2
    assert "bad.yaml:6: policy x: spec.mig.defaultProfile: unknown MIG profile" in capsys.readouterr().err


def test_the_console_script_runs_as_a_process(pod_file):
    done = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "mutate", "-f", str(pod_file), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    env = json.loads(done.stdout)["spec"]["containers"][0]["env"]
    assert {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"} in env
