"""What the API server passes on of our answers: warnings without control characters, each within
256 runes and all within 4,096 (k8s.io/apiserver endpoints/filters/warning.go), and audit
annotation keys that make `<webhook name>/<key>` a qualified name (admission/attributes.go)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.judge.validation import Decision
from policies.judge.verdict import Verdict
from policies.model.policy import Action
from webhook.serving.review import AdmissionResponse, one_line, shown_warnings

# apimachinery util/validation IsQualifiedName: a name part of at most 63 characters.
QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def test_a_multi_line_policy_message_becomes_one_line_kubectl_prints():
    message = "GPU pods need\n  a team label.\r\n\tAsk #platform."
    assert one_line(message) == "GPU pods need a team label. Ask #platform."


def test_a_long_warning_is_cut_at_256_runes_by_us_not_dropped():
    line = one_line("é" * 1000)
    assert len(line) == 256 and line.endswith("…")


@given(st.lists(st.text(max_size=600), max_size=40))
def test_warnings_never_hold_control_characters_and_fit_the_api_servers_limits(warnings):
    shown = shown_warnings(tuple(warnings))
    assert all(not CONTROL.search(w) and len(w) <= 256 for w in shown)
    assert sum(len(w) for w in shown) <= 4096


def test_warnings_past_4096_runes_are_counted_in_a_last_warning():
    shown = shown_warnings(tuple(f"w{i} " + "x" * 250 for i in range(30)))
    assert shown[-1].startswith("gpu-admission: ") and shown[-1].endswith("more warnings")
    assert str(30 - (len(shown) - 1)) in shown[-1]


def test_the_most_important_warnings_come_first_and_are_the_last_to_be_cut():
    notes = tuple(f"main: note {i} " + "x" * 200 for i in range(30))
    rule = "owners need a label (policy p) [rule owner, spec, Pod ml/p]"
    quota = "ml: gpuEquivalents 3 of 4 (policy q) [rule quota.gpuEquivalents, spec, Pod ml/p]"
    denied = "will be denied: spec.containers[0].resources: asks for 2 MIG devices (policy p)"
    shown = shown_warnings((*notes, rule, quota, denied))
    assert shown[:3] == [denied, quota, rule]
    assert shown[-1].startswith("gpu-admission: and ")


def test_the_review_carries_the_shown_warnings():
    review = AdmissionResponse("u", True, warnings=("a\nb",)).to_review("admission.k8s.io/v1")
    assert review["response"]["warnings"] == ["a b"]


def audit(policy: str, rule: str, message: str = "m") -> Verdict:
    return Verdict(policy=policy, rule=rule, message=message, action=Action.AUDIT, subject="Pod ml/p", path="")


@pytest.mark.parametrize(
    "policy, rule",
    [
        ("research-org-gpu-quota-policy-for-the-ml-platform-team", "per pod cap"),
        ("a" * 62, "-x"),
        ("UPPER_case", "rule with spaces"),
        ("--", ".."),
    ],
    ids=["cut-at-a-dash", "cut-at-the-dot", "upper-and-spaces", "nothing-left"],
)
def test_audit_annotation_keys_are_qualified_names_under_the_webhook_name(policy, rule):
    (key,) = Decision(True, (audit(policy, rule),)).audit_annotations
    assert QUALIFIED_NAME_PART.match(key) and len(key) <= 63, key


def test_two_audit_rules_whose_keys_would_meet_get_keys_of_their_own():
    decision = Decision(True, (audit("p" * 70, "a", "first"), audit("p" * 70, "b", "second")))
    annotations = decision.audit_annotations
    assert sorted(annotations.values()) == ["first", "second"]
    assert all(QUALIFIED_NAME_PART.match(key) and len(key) <= 63 for key in annotations)


NAMES = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=90)


@given(st.lists(st.tuples(NAMES, NAMES), min_size=1, max_size=8, unique=True))
def test_audit_annotation_keys_are_qualified_and_distinct_for_any_policy_and_rule_names(pairs):
    decision = Decision(True, tuple(audit(policy, rule, f"{policy}.{rule}") for policy, rule in pairs))
    annotations = decision.audit_annotations
    assert all(QUALIFIED_NAME_PART.match(key) and len(key) <= 63 for key in annotations), annotations
    distinct_names = {f"{policy}.{rule}" for policy, rule in pairs}
    assert len(annotations) == len(distinct_names)
