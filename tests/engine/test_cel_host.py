"""The CEL host beneath the engine (policies/cel): semantic versions as Kubernetes' semver library
reads them (blang/semver's rules), and the compiler's checked tree read from what it serializes,
literals as the compiler decoded them."""

from __future__ import annotations

import pytest
from cel_expr_python import cel

from policies.cel.checked import CheckedError, checked_tree
from policies.cel.semver import SemverError, compare, normalized, parse

ENV = cel.NewEnv(variables={"device": cel.Type.DYN})


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("1.2.3", "1.2.3"),
        ("550.54.15", "550.54.15"),
        ("1.0.0-rc.1", "1.0.0-rc.1"),
        ("1.0.0-alpha.beta+build.7", "1.0.0-alpha.beta"),  # build metadata takes no part
        ("0.0.0", "0.0.0"),
    ],
)
def test_a_version_reads_as_the_library_reads_it(text, canonical):
    assert parse(text).canonical == canonical


@pytest.mark.parametrize("text", ["", "1.2", "v1.2.3", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "1.2.x", "1..3"])
def test_what_the_library_refuses_is_refused(text):
    with pytest.raises(SemverError):
        parse(text)


@pytest.mark.parametrize(
    "text, canonical", [("v1.2", "1.2.0"), ("1", "1.0.0"), ("v01.02.03", "1.2.3"), ("1.2.3-rc.1", "1.2.3-rc.1")]
)
def test_normalizing_drops_the_v_fills_in_and_trims_zeros(text, canonical):
    assert normalized(text).canonical == canonical


def test_short_versions_with_prerelease_are_refused_even_normalized():
    with pytest.raises(SemverError):
        normalized("1.2-rc.1")


@pytest.mark.parametrize(
    "lower, higher",
    [
        ("1.2.3", "1.2.4"),
        ("1.9.0", "1.10.0"),
        ("1.0.0-rc.1", "1.0.0"),
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),  # numeric identifiers order below alphanumeric ones
        ("1.0.0-beta.2", "1.0.0-beta.11"),
    ],
)
def test_versions_are_ordered_as_semver_orders_them(lower, higher):
    assert compare(parse(lower), parse(higher)) == -1
    assert compare(parse(higher), parse(lower)) == 1
    assert compare(parse(lower), parse(lower)) == 0


def test_the_checked_tree_carries_literals_as_the_compiler_decoded_them():
    source = "device.driver == 'gpu.nvidi\\x61.com' && [1, 2u, 3.5, true, b'x', null, -7].size() > 0"
    tree = checked_tree(ENV.compile(source).serialize())
    assert tree.kind == "call" and tree.name == "_&&_"
    driver = tree.args[0]
    assert driver.name == "_==_" and driver.args[0].kind == "select" and driver.args[0].name == "driver"
    assert driver.args[1].value == "gpu.nvidia.com"
    listed = tree.args[1].args[0].args[0]  # size(...) > 0: the list is size's target
    assert [n.value for n in listed.args] == [1, 2, 3.5, True, b"x", None, -7]


def test_what_is_no_checked_expression_is_refused():
    with pytest.raises(CheckedError):
        checked_tree(b"\x0a\x03abc")
