"""`lint` catches the mistakes people make, with file, line, policy and field path; `-o json`."""

import json
from pathlib import Path

import pytest

from policies.model.advice import constant_outcome, unguarded_indexes
from tests.support.builders import policy
from tools.mig_classes import class_name, device_classes
from webhook.cli.main import main

EXAMPLES = Path(__file__).parents[2] / "examples" / "policies"


@pytest.mark.parametrize(
    "expression, unguarded",
    [
        pytest.param("object.metadata.labels['team'] == 'a'", ["object.metadata.labels['team']"], id="bare-index"),
        pytest.param("'team' in object.metadata.labels && object.metadata.labels['team'] == 'a'", [], id="in-guard"),
        pytest.param("has(object.metadata.labels.team) && object.metadata.labels['team'] == 'a'", [], id="has-guard"),
        pytest.param("object.metadata.labels[?'team'].orValue('') == 'a'", [], id="optional-index"),
        pytest.param(
            "object.metadata.annotations[\"x/y\"] == '1'", ['object.metadata.annotations["x/y"]'], id="double-quoted"
        ),
        pytest.param("object.spec.containers[0].name == 'a'", [], id="list-index-is-not-a-map-key"),
    ],
)
def test_unguarded_map_indexing_is_found(expression, unguarded):
    assert unguarded_indexes(expression) == unguarded


@pytest.mark.parametrize(
    "expression, said",
    [
        pytest.param("1 == 1", "names no variable", id="constant"),
        pytest.param("object.kind == 'Deployment'", "never true", id="kind-is-always-pod"),
        pytest.param("'Job' != object.kind", "never false", id="kind-reversed"),
        pytest.param("object.apiVersion == 'apps/v1'", "never true", id="api-version"),
        pytest.param("object.spec.containers.size() >= 0", "always true", id="size-never-negative"),
        pytest.param("object.kind == 'Pod' && 'team' in object.metadata.labels", None, id="kind-pod-is-fine"),
        pytest.param("'team' in object.metadata.labels", None, id="ordinary"),
    ],
)
def test_rules_with_the_same_value_on_every_pod_are_found(expression, said):
    found = constant_outcome(expression)
    assert (found is None) if said is None else (said in found)


def write(tmp_path, *documents):
    path = tmp_path / "policies.yaml"
    path.write_text("---\n".join(documents))
    return path


def test_lint_reports_each_finding_with_file_line_policy_and_path(tmp_path, capsys):
    path = write(
        tmp_path,
        policy("team", "rules:\n  - name: team\n    expression: \"object.metadata.labels['team'] == 'a'\"\n"),
    )
    assert main(["lint", str(path)]) == 0  # warnings fail only under --strict
    assert main(["lint", str(path), "--strict"]) == 1
    out = capsys.readouterr().out
    assert f"{path}:8: warning: policy team: spec.rules[0].expression: object.metadata.labels['team'] fails" in out


def test_a_message_expression_may_be_constant(tmp_path, capsys):
    rules = (
        "rules:\n  - name: r\n    expression: \"'x' in object.metadata.labels\"\n    messageExpression: \"'needs x'\"\n"
    )
    assert main(["lint", str(write(tmp_path, policy("p", "match: {namespaces: [a]}\n" + rules)))]) == 0


def test_overlapping_policies_with_different_profiles_are_told_which_decides(tmp_path, capsys):
    path = write(
        tmp_path,
        policy("wide", "mig: {defaultProfile: 1g.10gb}"),
        policy("ml", "priority: 5\nmatch: {namespaces: [ml-*]}\nmig: {defaultProfile: 3g.40gb}"),
        policy("other", "match: {namespaces: [web]}\nmig: {defaultProfile: 2g.20gb}\n"),
    )
    assert main(["lint", str(path), "-o", "json", "--strict"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    messages = [(f["policy"], f["message"]) for f in findings]
    assert any(p == "ml" and "policy wide" in m and "higher priority" in m for p, m in messages), messages
    assert any(p == "other" and "policy wide" in m and "by name" in m for p, m in messages), messages
    assert not any(p == "ml" and "policy other" in m for p, m in messages), "ml-* and web never meet"


def test_selectors_on_both_sides_keep_policies_apart(tmp_path, capsys):
    path = write(
        tmp_path,
        policy("a", "match: {namespaceSelector: {matchLabels: {tier: a}}}\nmig: {defaultProfile: 1g.10gb}"),
        policy("b", "match: {namespaceSelector: {matchLabels: {tier: b}}}\nmig: {defaultProfile: 3g.40gb}"),
    )
    assert main(["lint", str(path)]) == 0


def test_a_profile_no_allowed_model_has_is_an_error(tmp_path, capsys):
    path = write(tmp_path, policy("p", "mig:\n  gpuModels: [A100-80GB]\n  allowedProfiles: [1g.5gb]\n"))
    assert main(["lint", str(path), "-o", "json"]) == 1
    finding = json.loads(capsys.readouterr().out)["findings"][0]
    assert finding["severity"] == "error" and finding["path"] == "spec.mig.allowedProfiles[0]"
    assert "unknown MIG profile '1g.5gb' on A100-80GB" in finding["message"]


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_each_example_lints_clean(example, capsys):
    assert main(["lint", str(EXAMPLES / example)]) == 0, capsys.readouterr().out


def test_the_readme_lint_command_finds_the_examples(capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).parents[2])
    main(["lint", "examples/policies"])
    assert "4 files" in capsys.readouterr().err


def test_lint_reports_classes_that_serve_one_name_twice(tmp_path, capsys):
    (tmp_path / "p.yaml").write_text(policy("p", "mig: {allowedProfiles: [1g.10gb]}"))
    demo = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "mig-1g-10gb.gpu.nvidia.com"},
        "spec": {"extendedResourceName": "nvidia.com/mig-1g.10gb"},
    }
    state = tmp_path / "classes.yaml"
    state.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*device_classes(), demo]}))
    assert main(["lint", str(tmp_path / "p.yaml"), "--cluster-state", str(state), "--strict"]) == 1
    out = capsys.readouterr().out
    assert "nvidia.com/mig-1g.10gb is served by 2 DeviceClasses" in out and class_name("1g.10gb") in out
