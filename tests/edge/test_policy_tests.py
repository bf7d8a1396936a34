"""`gpu-admission test`: policy tests with expected verdicts, text, JSON and JUnit XML."""

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from webhook.cli.main import main

TESTS = Path(__file__).parents[2] / "examples" / "policies" / "tests"
RESOURCES = TESTS / "resources" / "pods.yaml"
TRAINING = TESTS.parent / "training-quota.yaml"


def test_the_examples_own_tests_pass(capsys):
    assert main(["test", str(TESTS)]) == 0
    out, err = capsys.readouterr()
    assert "FAIL" not in out and "0 failed" in err


def write_test(tmp_path, results: str) -> Path:
    (tmp_path / "t-test.yaml").write_text(
        "apiVersion: gpu-admission.io/v1alpha1\nkind: Test\nmetadata: {name: t}\n"
        f"policies: [{TRAINING}]\nresources: [{RESOURCES}]\nnamespace: team-a\nresults:\n{results}"
    )
    return tmp_path


def test_a_result_that_does_not_hold_fails_with_what_was_found(tmp_path, capsys):
    directory = write_test(tmp_path, "  - {resource: Pod/unlabelled, result: denied, rule: other}\n")
    assert main(["test", str(directory)]) == 1
    assert (
        "FAIL t: Pod/unlabelled denied: expected denied by */other, "
        "got denied (deny by team-a-training/require-team-label)" in (capsys.readouterr().out)
    )


def test_patched_fields_are_compared(tmp_path, capsys):
    limits = '{"spec.containers[0].resources.limits": {nvidia.com/mig-3g.40gb: "1"}}'
    good = f"  - {{resource: Pod/train, result: allowed, patched: {limits}}}\n"
    bad = '  - {resource: Pod/train, result: allowed, patched: {"spec.runtimeClassName": runc}}\n'
    assert main(["test", str(write_test(tmp_path, good + bad)), "-o", "json"]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["summary"] == {"tests": 1, "results": 2, "passed": 1, "failed": 1}
    outcomes = answer["results"]
    assert [o["passed"] for o in outcomes] == [True, False]
    assert outcomes[1]["reason"] == 'expected spec.runtimeClassName = "runc", got "nvidia"'


def test_junit_xml_has_a_case_per_result(tmp_path, capsys):
    results = "  - {resource: Pod/train, result: allowed}\n  - {resource: Pod/train, result: denied}\n"
    assert main(["test", str(write_test(tmp_path, results)), "-o", "junit"]) == 1
    suite = ElementTree.fromstring(capsys.readouterr().out)
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    assert [c.find("failure") is None for c in suite.iter("testcase")] == [True, False]


@pytest.mark.parametrize(
    "results, said",
    [
        pytest.param("  - {resource: Pod/train, result: maybe}\n", "results[0]", id="unknown-result"),
        pytest.param("  - [not, a, mapping]\n", "results[0]", id="not-a-mapping"),
        pytest.param("  - {resource: Pod/train, result: allowed\n", "not valid YAML", id="broken-yaml"),
    ],
)
def test_a_test_that_cannot_be_read_exits_2(tmp_path, capsys, results, said):
    assert main(["test", str(write_test(tmp_path, results))]) == 2
    assert said in capsys.readouterr().err


def test_a_directory_without_tests_exits_2(tmp_path, capsys):
    assert main(["test", str(tmp_path)]) == 2
