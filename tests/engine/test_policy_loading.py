"""Loading and linting policy documents: every problem with file, line and field path."""

import textwrap
from fractions import Fraction

import pytest

from policies.model.loader import load_texts
from webhook.cli.main import main

GOOD = """
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: good}
spec:
  quota:
    limits: {gpuEquivalents: "3/7"}
"""


def load(text, name="p.yaml"):
    return load_texts([(name, textwrap.dedent(text))])


def only_problem(text):
    result = load(text)
    assert len(result.problems) == 1, [str(p) for p in result.problems]
    return str(result.problems[0])


def test_several_documents_a_file_all_load():
    result = load(GOOD + "---\n" + GOOD.replace("name: good", "name: second"))
    assert [p.name for p in result.policies] == ["good", "second"]


def test_a_bad_document_is_reported_and_the_good_ones_of_the_file_still_load():
    bad = GOOD.replace("name: good", "name: bad").replace("gpuEquivalents", "gpuEquivalent")
    result = load(GOOD + "---\n" + bad)
    assert [p.name for p in result.policies] == ["good"]
    assert "p.yaml:15: policy bad: spec.quota.limits.gpuEquivalent: unknown field" in str(result.problems[0])


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            ("gpu-admission.io/v1alpha1", "gpu-admission.io/v2"),
            "p.yaml:2: policy good: apiVersion: must be gpu-admission.io/v1alpha1",
        ),
        (("kind: GPUPolicy", "kind: Policy"), "p.yaml:3: policy good: kind: must be GPUPolicy"),
        (('"3/7"', "0.5"), "spec.quota.limits.gpuEquivalents: must be an integer or a quoted exact amount"),
        (('"3/7"', '"lots"'), "'lots' is not an exact amount"),
        (("  quota:", "  quotas:"), "p.yaml:6: policy good: spec.quotas: unknown field"),
    ],
    ids=["api-version", "kind", "yaml-float", "not-a-number", "unknown-spec-field"],
)
def test_schema_problems_name_file_line_policy_and_path(change, expected):
    assert expected in only_problem(GOOD.replace(*change))


def test_cel_compile_errors_are_load_problems_with_the_rule_path():
    text = GOOD + "  rules:\n    - {name: r, expression: 'object.metadata.(', action: deny}\n"
    assert "policy good: spec.rules[0].expression: CEL: " in only_problem(text)


def test_unknown_models_and_profiles_name_the_closest_valid_ones():
    text = GOOD + "  mig:\n    gpuModels: [H100-80G]\n"
    assert "spec.mig.gpuModels[0]: unknown GPU model 'H100-80G'; closest: H100-80GB" in only_problem(text)
    text = GOOD + "  mig:\n    gpuModels: [A100-40GB]\n    defaultProfile: 1g.20gb\n"
    assert "unknown MIG profile '1g.20gb' on A100-40GB; closest:" in only_problem(text)


def test_slice_limits_must_name_profiles_of_the_policys_models():
    text = (
        GOOD.replace('limits: {gpuEquivalents: "3/7"}', "limits: {slices: {1g.5gb: 2}}")
        + "  mig: {gpuModels: [H100-80GB]}\n"
    )
    assert "spec.quota.limits.slices.1g.5gb: unknown field" in only_problem(text)


def test_duplicate_policy_names_keep_the_first():
    result = load_texts([("a.yaml", GOOD), ("b.yaml", GOOD)])
    assert len(result.policies) == 1
    assert "b.yaml:4: policy good: metadata.name: duplicate policy name (first defined at a.yaml:2)" in str(
        result.problems[0]
    )


def test_invalid_yaml_names_the_file_and_line():
    assert only_problem("a: b\nc: [\n").startswith("p.yaml:")


def test_exact_amounts_load_as_fractions():
    assert load(GOOD).policies[0].quota.limits.gpu_equivalents == Fraction(3, 7)


def test_lint_exits_0_on_good_files_and_1_printing_every_problem(tmp_path, capsys):
    (tmp_path / "good.yaml").write_text(GOOD)
    assert main(["lint", str(tmp_path)]) == 0
    (tmp_path / "bad.yaml").write_text(
        GOOD.replace("name: good", "name: bad").replace("3/7", "x") + "  mig: {strategy: half}\n"
    )
    assert main(["lint", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "bad.yaml:7: policy bad: spec.quota.limits.gpuEquivalents" in out
    assert "bad.yaml:8: policy bad: spec.mig.strategy: must be one of: mixed, single" in out


def test_the_bundled_policies_lint_clean(capsys):
    from pathlib import Path

    import policies.bundled

    assert main(["lint", str(Path(policies.bundled.__file__).parent)]) == 0


def test_the_example_policies_of_the_readme_lint_clean(capsys):
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples" / "policies"
    # Each is a setup of its own (each lints clean alone: test_lint_advice); together, lint says
    # where they would decide the same pods with different profiles, and which would win: warnings,
    # which fail only under --strict (#41: the docs call them clean).
    assert main(["lint", str(examples)]) == 0
    assert main(["lint", str(examples), "--strict"]) == 1
    out, err = capsys.readouterr()
    names = "dev-slices-only, inference, slices-everywhere, team-a-training"
    assert f"4 policies loaded ({names}), 0 problems, 2 warnings" in err
    assert all("spec.mig.defaultProfile" in line for line in out.splitlines())


TRUST_LINT = [
    ('quota: {sharedWeight: "3/2", limits: {pods: 1}}', "spec.quota.sharedWeight: must be between 0 and 1"),
    ("security: {allow: [deviceEnv, everything]}", "spec.security.allow[1]: must be one of: deviceEnv, envFrom"),
    ("security: {action: ignore}", "spec.security.action: must be one of: deny, warn, audit"),
    ("runtime: {env: {NVIDIA_VISIBLE_DEVICES: all}}", "spec.runtime.env.NVIDIA_VISIBLE_DEVICES: hands out GPU devices"),
    (
        "mig: {gpuModels: [A100-80GB], allowedProfiles: [1g.10gb]}\ntriton: {profile: 2g.20gb}",
        "spec.triton.profile: 2g.20gb is not in spec.mig.allowedProfiles",
    ),
]


@pytest.mark.parametrize(
    "spec, expected",
    TRUST_LINT,
    ids=["shared-weight-over-one", "unknown-device-check", "unknown-security-action", "device-env", "triton-slice"],
)
def test_policies_that_would_hand_out_or_misweigh_gpus_are_lint_errors(spec, expected):
    body = textwrap.indent(spec, "  ")
    text = f"apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata: {{name: p}}\nspec:\n{body}\n"
    assert expected in only_problem(text)


def test_the_device_env_a_runtime_may_set_is_one_that_grants_nothing():
    spec = "spec:\n  runtime: {env: {NVIDIA_VISIBLE_DEVICES: void}}\n"
    text = f"apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata: {{name: p}}\n{spec}"
    assert not load(text).problems


def test_a_document_of_nested_aliases_costs_what_its_nodes_do_not_what_they_expand_to():
    """A "billion laughs" (nine levels of ten aliases each: 10^9 strings once expanded) in a
    policy ConfigMap is read as the few dozen nodes it is, and refused as a policy, at once;
    walking it for line numbers once cost the whole expansion and stalled every reload."""
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    text = "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: laughs}\nspec:\n"
    text += "".join(f"  {line}\n" for line in levels)
    result = load_texts([("laughs.yaml", text)])
    assert result.problems and not result.policies
