"""CEL rules: deny denies, warn allows with a warning, audit allows with an audit annotation.

A rule that fails to evaluate denies, whatever its action: a policy that cannot be judged is
not a policy that passed (fail closed).
"""

from __future__ import annotations

from policies.judge.verdict import Verdict
from policies.model.cel import CelEvaluationError, CelInput, Variables
from policies.model.policy import Action, GPUPolicy, Rule


def _message(rule: Rule, data: CelInput, variables: Variables) -> str:
    if rule.message_expression is not None:
        try:
            text = rule.message_expression.evaluate(data, variables)
            if isinstance(text, str) and text:
                return text
        except CelEvaluationError:
            pass
    return rule.message


def check_rules(policy: GPUPolicy, data: CelInput) -> list[Verdict]:
    verdicts: list[Verdict] = []
    for i, rule in enumerate(policy.rules):
        try:
            passed = rule.expression.evaluate_bool(data, policy.variables)
        except CelEvaluationError as error:
            path = f"spec.rules[{i}].expression"
            verdicts.append(
                Verdict(
                    policy.name,
                    rule.name,
                    path,
                    f"rule could not be evaluated, denied to be safe: {error} (policy {policy.name})",
                    Action.DENY,
                )
            )
            continue
        if not passed:
            verdicts.append(
                Verdict(
                    policy.name,
                    rule.name,
                    f"spec.rules[{i}].expression",
                    f"{_message(rule, data, policy.variables)} (policy {policy.name})",
                    rule.action,
                )
            )
    return verdicts
