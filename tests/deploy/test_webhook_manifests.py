"""The webhook configurations are generated, not copied: deploy/base's and the chart's are what
tools/webhook_manifests.py writes (`python -m tools.webhook_manifests` after a change), and every
matchCondition is small."""

from __future__ import annotations

import yaml

from tools.webhook_manifests import MAX_EXPRESSION, outputs, render


def test_the_committed_webhook_configurations_are_the_generators_output():
    for path, text in outputs().items():
        assert path.read_text() == text, f"{path.name} differs: python -m tools.webhook_manifests"


def test_no_match_condition_is_over_8_kb():
    for document in yaml.safe_load_all(render(helm=False)):
        if document is None:
            continue
        for webhook in document["webhooks"]:
            for condition in webhook.get("matchConditions", []):
                assert len(condition["expression"]) < MAX_EXPRESSION, (webhook["name"], len(condition["expression"]))


def test_every_pod_controller_is_judged_only_when_its_template_could_reach_a_gpu():
    validating = [d for d in yaml.safe_load_all(render(helm=False)) if d and d["kind"].startswith("Validating")][0]
    served = {}
    for webhook in validating["webhooks"]:
        for rule in webhook["rules"]:
            for resource in rule["resources"]:
                served[(rule["apiGroups"][0], resource)] = webhook
    for key in [("apps", r) for r in ("deployments", "statefulsets", "daemonsets", "replicasets")] + [
        ("batch", "jobs"),
        ("batch", "cronjobs"),
    ]:
        (condition,) = served[key]["matchConditions"]
        # Any extended resource: a DRA DeviceClass may serve any name (extendedResourceName).
        assert "r.contains('/')" in condition["expression"], key
