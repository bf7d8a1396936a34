"""The webhook over real TLS, as the API server calls it (shared/reference/admission-contract.md)."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certs.cert_files import generate
from policies.engine import Engine
from tests.support.builders import as_v1pod_and_back, engine_from, gpu_container, plain_container, pod, policy
from tests.support.reviews import gpu_pod, review, send_chunked
from tests.support.server_harness import Client, https_server
from webhook.state import AdmissionSettings, EngineHolder

POLICY = policy(
    "team-a",
    """
match: {namespaces: [team-a]}
mig: {gpuModels: [A100-80GB], defaultProfile: 1g.10gb}
runtime: {runtimeClassName: nvidia}
rules:
  - {name: require-team-label, expression: "has(object.metadata.labels) && 'team' in object.metadata.labels",
     message: GPU pods need a team label, action: deny}
  - {name: prefer-priority, expression: "has(object.spec.priorityClassName)",
     message: set a priority class, action: warn}
  - {name: record-owner, expression: "false", message: owner recorded, action: audit}
""",
)


def holder_with(engine: Engine | None = None, **settings) -> EngineHolder:
    holder = EngineHolder(AdmissionSettings(**settings))
    holder.swap(engine or engine_from(POLICY))
    return holder


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with https_server(holder_with(), tmp_path_factory.mktemp("certs")) as (port, ca):
        yield port, ca


@pytest.fixture
def client(server):
    port, ca = server
    connection = Client(port, ca)
    yield connection
    connection.close()


def decoded_patch(response):
    return json.loads(base64.b64decode(response["patch"]))


def test_mutate_answers_a_json_patch_that_applies_and_yields_a_valid_v1pod(client):
    obj = gpu_pod({"team": "a"})
    status, body = client.review("/mutate", review(obj))
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == "uid-1" and response["allowed"] is True and response["patchType"] == "JSONPatch"
    patch = decoded_patch(response)
    assert {"op": "remove", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu"} in patch
    patched = jsonpatch.apply_patch(obj, patch)
    assert patched["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert as_v1pod_and_back(patched) == patched


def test_a_second_mutate_call_on_its_own_output_returns_no_patch(client):
    obj = gpu_pod({"team": "a"})
    _, first = client.review("/mutate", review(obj))
    patched = jsonpatch.apply_patch(obj, decoded_patch(first["response"]))
    _, second = client.review("/mutate", review(patched, uid="uid-2"))
    assert second["response"] == {"uid": "uid-2", "allowed": True}


def test_non_gpu_pods_other_kinds_and_other_operations_pass_untouched(client):
    for request in (
        review(pod(plain_container(), namespace="team-a")),
        review({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}, kind="Service"),
        review(gpu_pod(), operation="DELETE"),
    ):
        for path in ("/mutate", "/validate"):
            status, body = client.review(path, request)
            assert status == 200 and body["response"] == {"uid": "uid-1", "allowed": True}, (path, request)


def test_updates_are_never_patched_since_pod_resources_are_immutable_but_are_still_judged(client):
    _, mutated = client.review("/mutate", review(gpu_pod(), operation="UPDATE"))
    assert mutated["response"] == {"uid": "uid-1", "allowed": True}
    _, judged = client.review("/validate", review(gpu_pod(), operation="UPDATE"))
    assert judged["response"]["allowed"] is False


def test_validate_denies_with_status_code_and_a_message_naming_policy_rule_object_and_path(client):
    status, body = client.review("/validate", review(gpu_pod()))
    assert status == 200
    response = body["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["message"].startswith(
        "GPU pods need a team label (policy team-a) [rule require-team-label, spec.rules[0].expression, Pod team-a/p]"
    )


def test_validate_allows_with_warnings_and_audit_annotations(client):
    status, body = client.review("/validate", review(gpu_pod({"team": "a"})))
    response = body["response"]
    assert response["allowed"] is True
    assert response["warnings"][0].startswith("set a priority class (policy team-a)")
    assert all(len(w) <= 120 for w in response["warnings"])
    assert response["auditAnnotations"] == {"team-a.record-owner": "owner recorded (policy team-a)"}


def test_dry_run_gets_the_same_verdict_and_warnings(client):
    _, real = client.review("/validate", review(gpu_pod()))
    _, dry = client.review("/validate", review(gpu_pod(), dry_run=True))
    assert dry == real
    _, real = client.review("/mutate", review(gpu_pod()))
    _, dry = client.review("/mutate", review(gpu_pod(), dry_run=True))
    assert dry == real


def test_validate_judges_pod_controllers_by_their_template(client):
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"replicas": 2, "template": {"metadata": {}, "spec": {"containers": [gpu_container(gpus="1")]}}},
    }
    _, body = client.review("/validate", review(deployment, kind="Deployment", group="apps"))
    assert body["response"]["allowed"] is False
    assert "Deployment team-a/web spec.template" in body["response"]["status"]["message"]


def test_v1beta1_reviews_are_answered_in_kind(client):
    _, body = client.review("/mutate", review(gpu_pod({"team": "a"}), api_version="admission.k8s.io/v1beta1"))
    assert body["apiVersion"] == "admission.k8s.io/v1beta1" and body["response"]["patchType"] == "JSONPatch"


MALFORMED = [
    (b"{not json", "application/json", 400, "not JSON"),
    (b'{"a": 1}', "text/plain", 415, "Content-Type"),
    (b'{"apiVersion": "v1", "kind": "Pod"}', "application/json", 400, "AdmissionReview"),
    (
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
        "application/json",
        400,
        "no request",
    ),
    (json.dumps(review(gpu_pod(), uid="")).encode(), "application/json", 400, "uid"),
    (b"[" * 10 + b"]" * 10, "application/json", 400, "AdmissionReview object"),
]


@pytest.mark.parametrize(
    "body, content_type, code, message",
    MALFORMED,
    ids=["not-json", "content-type", "not-a-review", "no-request", "no-uid", "a-list"],
)
def test_a_body_that_is_not_an_admission_review_gets_a_short_4xx_never_a_traceback(
    client, body, content_type, code, message
):
    status, answer = client.request("POST", "/mutate", body, content_type)
    assert status == code
    assert message in answer["error"] and "Traceback" not in json.dumps(answer)


def test_a_review_endpoint_asked_with_another_method_is_a_405_naming_post(client):
    status, answer = client.request("GET", "/mutate")
    assert status == 405 and answer == {"error": "Method Not Allowed", "code": 405}


def test_an_unexpected_fault_reading_a_request_is_a_500_with_no_traceback(caplog):
    """Outside the engine's guard (here the body's stream breaks): a short JSON 500, the fault
    logged on the server, nothing of it to the client."""
    import io

    from webhook.serving.app import create_app

    class Broken(io.RawIOBase):
        def read(self, size=-1):
            raise OSError("connection reset while reading")

    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/validate",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": "10",
        "wsgi.input": Broken(),
    }
    said = []
    body = b"".join(create_app(holder_with()).wsgi_app(environ, lambda status, headers: said.append(status)))
    assert said == ["500 Internal Server Error"] and json.loads(body) == {"error": "internal error", "code": 500}
    assert "unexpected error outside a review" in caplog.text and b"Traceback" not in body


def test_paths_other_than_the_reviews_are_the_flask_apps(client):
    assert client.request("GET", "/healthz") == (200, "ok\n")
    assert client.request("POST", "/mutate/extra", b"{}")[0] == 404


UNREADABLE_OBJECTS = [
    (review({"kind": "Service"}), 400, "request.object is a Service"),
    (review(pod(gpu_container(gpus="lots"), namespace="team-a")), 422, "containers[0].resources.limits.nvidia.com/gpu"),
    (review(pod(gpu_container(gpus="0.5"), namespace="team-a")), 422, "nvidia.com/gpu"),
    (review(pod(gpu_container(gpus="-1"), namespace="team-a")), 422, "nvidia.com/gpu"),
    (review(pod(gpu_container(gpus=1.5), namespace="team-a")), 422, "nvidia.com/gpu"),
    (review(pod(gpu_container(gpus="1e600000"), namespace="team-a")), 422, "nvidia.com/gpu"),
]


@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
@pytest.mark.parametrize(
    "body, code, message",
    UNREADABLE_OBJECTS,
    ids=["object-kind-mismatch", "word-quantity", "half-gpu", "negative-gpu", "float-gpu", "huge-exponent"],
)
def test_a_review_whose_object_cannot_be_read_is_answered_200_with_a_denial_naming_the_field(
    client, endpoint, body, code, message
):
    """A non-200 is a failed call to the API server ("Internal error occurred" under Fail, the
    object let through under Ignore): the answer a user can read is a denial with the field."""
    status, answer = client.request("POST", endpoint, json.dumps(body).encode())
    assert status == 200
    response = answer["response"]
    assert response["uid"] == body["request"]["uid"] and response["allowed"] is False
    assert response["status"]["code"] == code and message in response["status"]["message"]
    assert "Traceback" not in json.dumps(answer)


def test_a_body_over_3_mib_is_refused_with_413(client):
    big = json.dumps(review(gpu_pod() | {"padding": "x" * (3 * 1024 * 1024)})).encode()
    status, answer = client.request("POST", "/validate", big)
    assert status == 413


def test_readyz_waits_for_a_policy_set_and_healthz_does_not(tmp_path):
    holder = EngineHolder()
    with https_server(holder, tmp_path) as (port, ca):
        client = Client(port, ca)
        assert client.request("GET", "/healthz")[0] == 200
        assert client.request("GET", "/readyz")[0] == 503
        holder.swap(engine_from(POLICY))
        assert client.request("GET", "/readyz")[0] == 200


class BrokenEngine(Engine):
    def mutate(self, *args, **kwargs):
        raise RuntimeError("engine bug")

    def validate(self, *args, **kwargs):
        raise RuntimeError("engine bug")

    def judge(self, *args, **kwargs):
        raise RuntimeError("engine bug")


@pytest.mark.parametrize("fail_open, allowed", [(False, False), (True, True)], ids=["fail-closed", "fail-open"])
def test_an_engine_bug_answers_that_request_per_fail_open_and_the_server_keeps_serving(tmp_path, fail_open, allowed):
    good = engine_from(POLICY)
    holder = holder_with(BrokenEngine(good.policy_set), fail_open=fail_open)
    with https_server(holder, tmp_path) as (port, ca):
        client = Client(port, ca)
        for path in ("/mutate", "/validate"):
            status, body = client.review(path, review(gpu_pod({"team": "a"})))
            assert status == 200 and body["response"]["allowed"] is allowed
            assert "engine bug" not in json.dumps(body)
        assert client.request("GET", "/healthz")[0] == 200


def test_metrics_count_reviews_by_endpoint_operation_decision_and_dry_run(client):
    client.review("/validate", review(gpu_pod()))
    dry = review(gpu_pod())
    dry["request"]["dryRun"] = True
    client.review("/validate", dry)
    status, text = client.request("GET", "/metrics")
    assert status == 200
    for dry_run in ("false", "true"):  # a dry run is told apart from what the cluster admits (#41)
        labels = f'decision="denied",dry_run="{dry_run}",endpoint="validate",operation="CREATE"'
        assert f"gpu_admission_reviews_total{{{labels}}}" in text
    assert "gpu_admission_review_seconds_bucket" in text


def test_the_certificate_is_checked_against_the_hostname(tmp_path):
    generate(tmp_path, "webhook", "gpu-system")  # SANs for the Service only, not localhost
    with https_server(holder_with(), tmp_path) as (port, ca), pytest.raises(ssl.SSLCertVerificationError):
        Client(port, ca).request("GET", "/healthz")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=10),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
            max_leaves=20,
        ).map(lambda v: json.dumps(v).encode()),
        st.builds(
            lambda r: json.dumps(r).encode(),
            st.fixed_dictionaries(
                {
                    "apiVersion": st.just("admission.k8s.io/v1"),
                    "kind": st.just("AdmissionReview"),
                    "request": st.dictionaries(
                        st.sampled_from(["uid", "kind", "operation", "object", "namespace", "userInfo"]),
                        st.none()
                        | st.text(max_size=5)
                        | st.integers()
                        | st.dictionaries(st.text(max_size=4), st.text(max_size=4)),
                        max_size=6,
                    ),
                }
            ),
        ),
    )
)
def test_random_bodies_get_200_or_4xx_and_never_break_the_server(server, body):
    port, ca = server
    client = Client(port, ca)
    for path in ("/mutate", "/validate"):
        status, _ = client.request("POST", path, body)
        assert status == 200 or 400 <= status < 500
    assert client.request("GET", "/healthz")[0] == 200
    client.close()


def configmap(data, labelled=True):
    labels = {"gpu-admission.io/policy": "true"} if labelled else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "team-a", "namespace": "gpu-admission", "labels": labels},
        "data": data,
    }


def test_validate_rejects_a_broken_policy_configmap_with_its_lint_errors(client):
    broken = configmap({"p.yaml": POLICY.replace("1g.10gb", "1g.11gb")})
    _, body = client.review("/validate", review(broken, kind="ConfigMap", namespace="gpu-admission", dry_run=True))
    response = body["response"]
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert "configmap/gpu-admission/team-a/p.yaml:" in response["status"]["message"]
    assert "spec.mig.defaultProfile: unknown MIG profile '1g.11gb'" in response["status"]["message"]


def test_validate_admits_good_policy_configmaps_and_ignores_unlabelled_ones(client):
    for obj in (configmap({"p.yaml": POLICY}), configmap({"p.yaml": "not: [yaml"}, labelled=False)):
        _, body = client.review("/validate", review(obj, kind="ConfigMap", namespace="gpu-admission"))
        assert body["response"]["allowed"] is True


def team_configmap(data):
    return {**configmap(data), "metadata": {**configmap(data)["metadata"], "namespace": "team-a"}}


@pytest.mark.parametrize(
    "namespaced, linted",
    [("", False), ("all", True)],
    ids=["namespaced-policies-off", "namespaced-policies-on"],
)
def test_a_labelled_configmap_outside_the_webhooks_namespace_is_a_policy_only_where_namespaced_ones_are_on(
    tmp_path, namespaced, linted
):
    broken = team_configmap({"p.yaml": "not: [yaml"})
    holder = holder_with(policy_namespace="gpu-admission", namespaced_policies=namespaced)
    with https_server(holder, tmp_path) as (port, ca):
        client = Client(port, ca)
        try:
            _, body = client.review("/validate", review(broken, kind="ConfigMap", namespace="team-a"))
        finally:
            client.close()
    assert body["response"]["allowed"] is not linted


def test_a_policy_configmap_is_an_env_source_too_and_both_verdicts_are_told(client):
    both = team_configmap({"p.yaml": "not: [yaml", "CUDA_VERSION": "12.4"})
    _, body = client.review("/validate", review(both, kind="ConfigMap", namespace="team-a"))
    response = body["response"]
    assert response["allowed"] is False and response["status"]["code"] == 422
    message = response["status"]["message"]
    assert message.startswith("policy rejected: configmap/team-a/team-a/") and "p.yaml" in message
    assert "ConfigMap key CUDA_VERSION" in message and "[rule security.envFrom, data.CUDA_VERSION" in message


def test_a_json_content_type_with_parameters_is_accepted(client):
    body = json.dumps(review(gpu_pod())).encode()
    status, answer = client.request("POST", "/mutate?timeout=5s", body, "application/json; charset=utf-8")
    assert status == 200 and answer["response"]["patchType"] == "JSONPatch"


def test_a_chunked_body_is_read_whole(client):
    status, answer = send_chunked(
        client, "/mutate?timeout=5s", json.dumps(review(gpu_pod(), uid="chunked")).encode(), 100
    )
    assert status == 200 and answer["response"]["uid"] == "chunked" and answer["response"]["patchType"] == "JSONPatch"


def test_a_chunked_body_over_3_mib_is_refused_with_413(client):
    big = json.dumps(review(gpu_pod() | {"padding": "x" * (3 * 1024 * 1024)})).encode()
    status, answer = send_chunked(client, "/validate", big)
    assert status == 413, answer


def test_a_content_length_that_is_not_a_number_is_a_400(server):
    port, ca = server
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: x\r\n\r\n{}"
        )
        response = http.client.HTTPResponse(tls)
        response.begin()
        assert 400 <= response.status < 500


@pytest.fixture
def json_logs():
    """The server's own log set-up (JSON lines), writing into a buffer; put back afterwards."""
    import io
    import logging

    from webhook import logs

    logger = logging.getLogger("gpu_admission")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    flags = (logging._srcfile, logging.logThreads, logging.logProcesses, logging.logMultiprocessing)
    logs.configure("INFO")
    buffer = io.StringIO()
    logger.handlers[0].setStream(buffer)
    yield buffer
    logger.handlers[:], logger.level, logger.propagate = saved
    logging._srcfile, logging.logThreads, logging.logProcesses, logging.logMultiprocessing = flags


def test_a_review_that_acts_is_one_json_log_line_with_uid_object_decision_and_latency(json_logs):
    import re

    from webhook.serving.app import create_app

    app = create_app(holder_with())
    obj = pod(gpu_container(), namespace="team-a")
    obj["metadata"]["name"] = "trainer"
    body = json.dumps(review(obj, uid="logged-uid")).encode()
    answer = app.test_client().post("/validate", data=body, content_type="application/json")
    assert answer.status_code == 200
    lines = [json.loads(line) for line in json_logs.getvalue().splitlines()]
    entry = next(line for line in lines if line["message"] == "review")
    assert entry["uid"] == "logged-uid" and entry["namespace"] == "team-a" and entry["name"] == "trainer"
    assert entry["endpoint"] == "validate" and entry["decision"] == "denied" and entry["kind"] == "Pod"
    assert "require-team-label" in entry["denial"] and entry["latencyMs"] > 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"]) and entry["level"] == "info"


@pytest.mark.parametrize("level, logged", [("INFO", False), ("DEBUG", True)], ids=["at-info", "at-debug"])
def test_a_review_that_changes_and_says_nothing_is_logged_only_at_debug(json_logs, level, logged):
    import logging

    from webhook.serving.app import create_app

    logging.getLogger("gpu_admission").setLevel(level)
    app = create_app(holder_with())
    obj = pod(plain_container(), namespace="team-a")
    answer = app.test_client().post("/mutate", data=json.dumps(review(obj)), content_type="application/json")
    assert answer.status_code == 200 and "patch" not in answer.get_json()["response"]
    lines = [json.loads(line) for line in json_logs.getvalue().splitlines()]
    reviews = [line for line in lines if line["message"] == "review"]
    assert [(r["decision"], r["level"]) for r in reviews] == ([("allowed", "debug")] if logged else [])


def test_validate_judges_custom_resources_by_each_template_named_by_its_path(client):
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": "team-a"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [gpu_container(gpus="1")]}}}
            }
        },
    }
    review_body = review(job, kind="PyTorchJob", group="kubeflow.org")
    _, body = client.review("/validate", review_body)
    assert body["response"]["allowed"] is False
    assert "PyTorchJob team-a/ddp spec.pytorchReplicaSpecs.Worker.template" in body["response"]["status"]["message"]
    unknown = review({**job, "apiVersion": "example.com/v1", "kind": "Thing"}, kind="Thing", group="example.com")
    status, body = client.review("/validate", unknown)
    assert status == 200 and body["response"]["allowed"] is True


def test_a_policy_configmap_that_loads_but_lint_warns_about_is_admitted_with_the_warning(client):
    rule = "  rules:\n    - name: team\n      expression: \"object.metadata.labels['team'] == 'a'\"\n"
    text = "apiVersion: gpu-admission.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: t}\nspec:\n" + rule
    _, body = client.review(
        "/validate", review(configmap({"p.yaml": text}), kind="ConfigMap", namespace="gpu-admission")
    )
    response = body["response"]
    assert response["allowed"] is True
    assert any(w.startswith("lint: configmap/gpu-admission/team-a/p.yaml:7: policy t:") for w in response["warnings"])


def test_a_malformed_custom_resource_template_is_denied_with_a_422_naming_its_path(client):
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": "team-a"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": "not a template"}}},
    }
    status, body = client.review("/validate", review(job, kind="PyTorchJob", group="kubeflow.org"))
    assert status == 200 and body["response"]["allowed"] is False
    assert body["response"]["status"]["code"] == 422
    assert "spec.pytorchReplicaSpecs.Worker.template" in body["response"]["status"]["message"]
