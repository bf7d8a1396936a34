"""The CLI where a platform engineer would trip: every wrong input is one line and exit 2, never
a silent success or a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from webhook.cli.main import main

GPU_ADMISSION = str(Path(sys.executable).parent / "gpu-admission")


@pytest.mark.parametrize("make", [lambda p: p / "empty.yaml", lambda p: p / "no-manifests"], ids=["file", "directory"])
def test_validate_and_mutate_of_nothing_are_bad_input_not_a_green(tmp_path, capsys, make):
    target = make(tmp_path)
    if target.suffix:
        target.write_text("")
    else:
        target.mkdir()
    for command in ("validate", "mutate"):
        assert main([command, "-f", str(target)]) == 2
        assert "no documents in" in capsys.readouterr().err


def test_version_says_the_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("gpu-admission ")


def test_certs_alone_names_its_commands(capsys):
    assert main(["certs"]) == 2
    assert "{generate,client}" in capsys.readouterr().err


def test_certs_generate_refuses_to_replace_a_ca_unless_forced(tmp_path, capsys):
    arguments = ["certs", "generate", "--service", "s", "--namespace", "n", "--out", str(tmp_path / "c")]
    assert main(arguments) == 0
    first = (tmp_path / "c" / "ca.key").read_bytes()
    assert main(arguments) == 2 and "--force" in capsys.readouterr().err
    assert (tmp_path / "c" / "ca.key").read_bytes() == first
    assert main([*arguments, "--force"]) == 0 and (tmp_path / "c" / "ca.key").read_bytes() != first


@pytest.mark.parametrize("command", ["serve", "certs generate", "certs client", "quota", "audit", "validate"])
def test_every_command_shows_its_exit_codes_in_its_help(command, capsys):
    assert main([*command.split(), "--help"]) == 0
    assert "exit codes:" in capsys.readouterr().out


def test_write_reports_without_live_is_refused(capsys):
    assert main(["audit", "--cluster-state", "x.yaml", "--write-reports"]) == 2
    assert "--write-reports needs --live" in capsys.readouterr().err


def test_serve_with_a_policies_path_that_does_not_exist_exits_at_once(tmp_path, capsys):
    assert main(["serve", "--policies", str(tmp_path / "nope"), "--cert-dir", str(tmp_path / "c")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


@pytest.mark.parametrize("name, value", [("GPU_ADMISSION_THREADS", "abc"), ("GPU_ADMISSION_CONNECTIONS", "-3")])
def test_a_bad_number_in_the_environment_is_one_line_and_exit_2(tmp_path, name, value):
    env = {**os.environ, name: value}
    done = subprocess.run(
        [GPU_ADMISSION, "serve", "--cert-dir", str(tmp_path), "--bind", "127.0.0.1:0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {name}={value!r} is not a positive whole number"


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MIXED = """\
apiVersion: v1
kind: Service
metadata: {name: c, namespace: ml}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml, annotations: {gpu-admission.io/mig-profile: 1g.10gb}}
spec:
  containers: [{name: c, image: cuda, resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 3000}}}]
"""


def test_mutate_patch_prints_one_patch_per_document_passed_through_ones_included(tmp_path, capsys):
    (tmp_path / "mixed.yaml").write_text(MIXED)
    assert main(["mutate", "-f", str(tmp_path / "mixed.yaml"), "-o", "patch"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0] == "[]" and lines[1].startswith("[{")


def test_validate_json_carries_the_mutation_warnings_text_prints_and_a_summary_follows(tmp_path, capsys):
    (tmp_path / "mixed.yaml").write_text(MIXED)
    assert main(["validate", "-f", str(tmp_path / "mixed.yaml")]) == 0
    text = capsys.readouterr()
    assert main(["validate", "-f", str(tmp_path / "mixed.yaml"), "-o", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["summary"]["judged"] == 1
    (judged,) = answer["results"]
    printed = [line.strip() for line in text.out.splitlines() if line.strip().startswith("warning:")]
    assert judged["warnings"] and all(any(w in line for line in printed) for w in judged["warnings"])
    assert "1 judged: 0 allowed, 1 allowed with warnings, 0 denied; 1 skipped" in text.err


def test_policy_tests_run_only_what_run_selects(capsys):
    assert main(["test", str(EXAMPLES / "policies" / "tests"), "--run", "quota"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out and all("quota" in line for line in out)
    assert main(["test", str(EXAMPLES / "policies" / "tests"), "--run", "no-such-test"]) == 2


def test_lint_accepts_an_intended_overlap_named_by_its_two_policies(capsys):
    policies = str(EXAMPLES / "policies")
    assert main(["lint", policies, "--strict"]) == 1
    accepted = ["--allow-overlap", "inference,team-a-training", "--allow-overlap", "team-a-training,slices-everywhere"]
    assert main(["lint", policies, *accepted, "--strict"]) == 0
    assert "0 warnings" in capsys.readouterr().err
    assert main(["lint", policies, "--allow-overlap", "only-one"]) == 2


def test_every_bad_setting_of_the_environment_is_named_on_a_line_of_its_own(tmp_path):
    env = {
        **os.environ,
        "GPU_ADMISSION_FAIL_OPEN": "True",
        "GPU_ADMISSION_AUDIT_SECONDS": "-1",
        "GPU_ADMISSION_LOG_LEVEL": "loud",
        "GPU_ADMISSION_READ_TIMEOUT": "nan",
    }
    done = subprocess.run(
        [GPU_ADMISSION, "serve", "--cert-dir", str(tmp_path)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("error: GPU_ADMISSION_") for line in lines)


def test_the_containers_gunicorn_refuses_a_bad_environment_in_one_line_per_setting(tmp_path):
    env = {**os.environ, "GPU_ADMISSION_THREADS": "many", "GPU_ADMISSION_CERT": str(tmp_path / "tls.crt")}
    command = [sys.executable, "-m", "gunicorn", "-c", "python:webhook.serving.gunicorn_conf", "webhook.wsgi:app"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode != 0 and "error: GPU_ADMISSION_THREADS='many' is not a positive whole number" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_shell_completion_completes_commands_and_their_flags(shell, capsys, tmp_path):
    assert main(["completion", shell]) == 0
    completion = tmp_path / "completion.sh"
    completion.write_text(capsys.readouterr().out)
    if shell == "zsh":
        assert completion.read_text().startswith("autoload -U +X bashcompinit")
        return
    probe = (
        f"source {completion}; "
        "COMP_WORDS=(gpu-admission va); COMP_CWORD=1; _gpu_admission; echo ${COMPREPLY[@]}; "
        "COMP_WORDS=(gpu-admission certs generate --fo); COMP_CWORD=3; _gpu_admission; echo ${COMPREPLY[@]}"
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.stdout.split("\n")[:2] == ["validate", "--force"]
    assert "--policy-snapshot" not in completion.read_text()


def test_a_missing_file_is_named_plainly_and_an_abbreviated_flag_is_refused(capsys):
    """#41: `[Errno 2] No such file or directory: '/x'` read as a crash; `--fil` was taken for `--file`."""
    assert main(["validate", "-f", "/nonexistent/pod.yaml"]) == 2
    assert capsys.readouterr().err == "error: /nonexistent/pod.yaml: no such file or directory\n"
    assert main(["validate", "-f", "-", "--fil", str(EXAMPLES / "policies" / "training-quota.yaml")]) == 2
    assert "unrecognized arguments: --fil" in capsys.readouterr().err
    assert main(["lint", "--stric", str(EXAMPLES / "policies")]) == 2
    assert "unrecognized arguments: --stric" in capsys.readouterr().err
