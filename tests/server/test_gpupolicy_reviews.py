"""GPUPolicy objects at `kubectl apply`, over real HTTPS as the API server sends them: the same
loader and verdict as a policy ConfigMap's file, after the API server's own schema check. A name
a policy already in force holds elsewhere is said (the newcomer waits until that one goes); an
UPDATE that leaves the document as it was, and the status subresource, are not judged again."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.builders import engine_from, policy
from tests.support.server_harness import ApiServer, admission_review, api_server, holder_of

HELD = [policy("held-by-a-configmap", "priority: 1")]


def gpupolicy(name: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gpu-admission.io/v1alpha1",
        "kind": "GPUPolicy",
        "metadata": {"name": name, "generation": 1},
        "spec": {"match": {"namespaces": ["team-a"]}, **spec},
    }


@pytest.fixture
def server(tmp_path) -> ApiServer:
    with api_server(holder_of(engine_from(*HELD)), tmp_path) as server:
        yield server


def verdict(server: ApiServer, obj: dict[str, Any], **options: Any) -> dict[str, Any]:
    status, body = server.client.review("/validate", admission_review(obj, **options))
    assert status == 200
    return body["response"]


def test_a_gpupolicy_that_loads_is_admitted_with_what_lint_would_warn(server):
    assert verdict(server, gpupolicy(quota={"limits": {"gpus": 2}}))["allowed"] is True


def test_a_gpupolicy_the_loader_refuses_is_denied_naming_the_object_and_field(server):
    broken = gpupolicy(rules=[{"name": "bad", "expression": "object.("}])
    response = verdict(server, broken, dry_run=True)
    assert response["allowed"] is False and response["status"]["code"] == 422
    message = response["status"]["message"]
    assert message.startswith("policy rejected: gpupolicy/team-a:")
    assert "policy team-a: spec.rules[0].expression" in message


def test_the_verdict_is_the_configmaps_for_the_same_document(server):
    import yaml

    broken = gpupolicy(mig={"defaultProfile": "1g.11gb"})
    document = {k: v for k, v in broken.items() if k != "metadata"} | {"metadata": {"name": "team-a"}}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "gpu-admission", "labels": {"gpu-admission.io/policy": "true"}},
        "data": {"p.yaml": yaml.safe_dump(document)},
    }
    as_object = verdict(server, broken)["status"]["message"].split(": ", 2)[-1]
    as_configmap = verdict(server, configmap)["status"]["message"].split(": ", 2)[-1]
    assert as_object == as_configmap
    assert "spec.mig.defaultProfile: unknown MIG profile '1g.11gb'" in as_object


def test_a_name_another_source_holds_is_admitted_with_a_warning_that_it_waits_for_it(server):
    """A policy moving from a ConfigMap to an object is applied first, the old one deleted next:
    no moment without it."""
    response = verdict(server, gpupolicy("held-by-a-configmap"))
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert "duplicate policy name (also in policy-0.yaml); it takes over once that one is gone" in warning


def test_an_update_that_leaves_the_document_as_it_was_is_not_judged_again(server):
    broken = gpupolicy(rules=[{"name": "bad", "expression": "object.("}])
    relabelled = copy.deepcopy(broken)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert verdict(server, relabelled, operation="UPDATE", old=broken)["allowed"] is True
    assert verdict(server, broken, operation="UPDATE", old=gpupolicy())["allowed"] is False


def test_the_status_subresource_and_deletes_are_not_judged(server):
    broken = gpupolicy(rules=[{"name": "bad", "expression": "object.("}])
    assert verdict(server, broken, operation="UPDATE", old=broken, sub_resource="status")["allowed"] is True
    assert verdict(server, broken, operation="DELETE")["allowed"] is True
