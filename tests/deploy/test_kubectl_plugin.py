"""`kubectl gpu-admission ...` through the real kubectl binary's plugin discovery."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import policies.bundled

KUBECTL = shutil.which("kubectl")
BIN = Path(sys.executable).parent
EXAMPLES = Path(__file__).parents[2] / "examples" / "policies"
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def kubectl(*args):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "KUBECONFIG": os.devnull}
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, timeout=120)


def test_kubectl_discovers_the_plugin_on_path():
    done = kubectl("plugin", "list")
    assert "kubectl-gpu_admission" in done.stdout, done.stdout + done.stderr


def test_kubectl_gpu_admission_lint_runs_the_command():
    done = kubectl("gpu-admission", "lint", str(Path(policies.bundled.__file__).parent))
    assert done.returncode == 0, done.stderr
    assert "2 policies loaded (default-gpu, default-mig-namespaces)" in done.stderr


def test_kubectl_gpu_admission_validate_exits_as_the_command_does(tmp_path):
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n"
        "spec: {containers: [{name: a, image: x, resources: {limits: {nvidia.com/gpu: 9}}}]}\n"
    )
    done = kubectl("gpu-admission", "validate", "-f", str(pod), "--policies", str(EXAMPLES / "slices-everywhere.yaml"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "per-pod cap" in done.stdout


def test_the_krew_manifest_names_the_archive_the_generator_builds_and_its_shim_is_the_plugin(tmp_path):
    import hashlib
    import io
    import tarfile

    import yaml

    from tools import krew

    data = krew.archive()
    assert data == krew.archive()  # byte for byte the same on every build
    assert krew.MANIFEST.read_text() == krew.manifest(data), "python -m tools.krew"
    manifest = yaml.safe_load(krew.MANIFEST.read_text())
    assert manifest["kind"] == "Plugin" and manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    for platform in manifest["spec"]["platforms"]:
        assert platform["sha256"] == hashlib.sha256(data).hexdigest()
        assert platform["bin"] == "kubectl-gpu_admission"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(tmp_path / "krew", filter="data")
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'krew'}{os.pathsep}{BIN}{os.pathsep}/usr/bin:/bin",
        "KUBECONFIG": os.devnull,
    }
    done = subprocess.run([KUBECTL, "gpu-admission", "validate"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "usage: kubectl gpu-admission validate" in done.stderr, done.stderr
