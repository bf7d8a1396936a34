"""One review in, one response out: which engine call a request needs, and what it becomes.

An engine failure on one request is a denial for that request (or an allow with `failOpen`),
logged with its uid; the server keeps serving.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from policies import ENV_SOURCE_KINDS, InputError, Operation, PolicyProblem, load_texts
from webhook.metrics import ENGINE_ERRORS
from webhook.serving.http_errors import BadRequest
from webhook.serving.review import AdmissionRequest, AdmissionResponse
from webhook.sources import gpupolicy_objects
from webhook.sources.configmaps import holds_policies, is_policy_configmap, policy_owner, texts_of
from webhook.sources.store import Texts, name_clash
from webhook.state import EngineHolder

log = logging.getLogger("gpu_admission.admission")
JUDGED_OPERATIONS = (Operation.CREATE, Operation.UPDATE)
# The object itself, the Pod as pods/ephemeralcontainers would leave it (its device access), and
# as pods/resize would (its CPU and memory changed in place: rules and caps read them).
JUDGED_SUBRESOURCES = ("", "ephemeralcontainers", "resize")


def _require_object(request: AdmissionRequest) -> dict[str, object]:
    if not isinstance(request.object, dict):
        raise BadRequest("request.object must be the object under review")
    if request.object.get("kind") not in (None, request.kind.kind):
        raise BadRequest(f"request.object is a {request.object.get('kind')}, request.kind says {request.kind.kind}")
    return request.object


def _guarded(
    endpoint: str, holder: EngineHolder, request: AdmissionRequest, run: Callable[[], AdmissionResponse]
) -> AdmissionResponse:
    try:
        return run()
    except (InputError, BadRequest) as error:
        # A well-formed review whose object is wrong is answered, not failed: HTTP 200 with a
        # denial kubectl prints ("admission webhook ... denied the request: <field>: ..."). A
        # non-200 would be a failed call to the API server: "Internal error occurred" under
        # failurePolicy Fail, the object let through unjudged under Ignore.
        code = 422 if isinstance(error, InputError) else error.code
        subject = f"{request.kind.kind} {request.namespace}/{request.display_name}".replace(" /", " ")
        return AdmissionResponse(request.uid, False, message=f"{subject}: {error}", code=code)
    except Exception:
        ENGINE_ERRORS.labels(endpoint).inc()
        log.exception("engine failed on a review", extra={"fields": {"uid": request.uid, "endpoint": endpoint}})
        if holder.settings.fail_open:
            return AdmissionResponse(request.uid, True, warnings=("gpu-admission: internal error, allowed (failOpen)",))
        return AdmissionResponse(
            request.uid, False, message="gpu-admission: internal error, denied to be safe", code=500
        )


def mutate(holder: EngineHolder, request: AdmissionRequest) -> AdmissionResponse:
    """Pods on CREATE only: an UPDATE may not change a pod's resources, so a patch would break it."""
    engine = holder.engine
    if (
        engine is None
        or not request.kind.is_core_pod
        or request.operation is not Operation.CREATE
        or request.sub_resource
    ):
        return AdmissionResponse(request.uid, True)

    def run() -> AdmissionResponse:
        raw = _require_object(request)
        _read_namespace_first(holder, request)
        with holder.engine_gate:
            result = engine.mutate(raw, request.info(), holder.cluster)
        return AdmissionResponse(request.uid, True, result.patch, result.warnings)

    return _guarded("mutate", holder, request, run)


def _read_namespace_first(holder: EngineHolder, request: AdmissionRequest) -> None:
    """A namespace the watch has not shown yet is read from the API server before the engine
    gate, not inside it: every engine run of the replica would wait on that request."""
    holder.cluster.namespace_labels(request.namespace)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _configmap_or_secret(holder: EngineHolder, request: AdmissionRequest) -> AdmissionResponse:
    """Every ConfigMap and Secret is an env source first: its keys reach any pod of the namespace
    by envFrom, whatever its labels say (a label is the writer's to set). A labelled ConfigMap the
    replica reads policies from is linted as well, and both verdicts stand."""
    as_env = _env_source(holder, request)
    settings = holder.settings
    if not (
        request.kind.kind == "ConfigMap"
        and is_policy_configmap(_dict(request.object))
        and holds_policies(
            request.namespace, settings.policy_namespace, settings.namespaced_policies, holder.cluster.namespace_labels
        )
    ):
        return as_env
    as_policy = _policy_configmap(holder, request)
    if as_env.allowed:
        return as_policy._replace(warnings=as_env.warnings + as_policy.warnings)
    if as_policy.allowed:
        return as_env._replace(warnings=as_env.warnings + as_policy.warnings)
    return as_policy._replace(message=f"{as_policy.message}; {as_env.message}", warnings=as_env.warnings)


def _policy_configmap(holder: EngineHolder, request: AdmissionRequest) -> AdmissionResponse:
    """A policy ConfigMap is judged by lint: `kubectl apply` of a broken policy fails with the errors.

    An UPDATE that leaves the policy texts as they were (labels, annotations: the webhook's own
    status note among them) is not judged again.
    """
    raw = _require_object(request)
    if not is_policy_configmap(raw):
        return AdmissionResponse(request.uid, True)
    source, texts = texts_of(raw, request.namespace, request.name)
    old = request.old_object
    if (
        isinstance(old, dict)
        and is_policy_configmap(old)
        and texts_of(old, request.namespace, request.name)[1] == texts
    ):
        return AdmissionResponse(request.uid, True)
    owner = policy_owner(request.namespace, holder.settings.policy_namespace)
    return _policy_verdict(holder, request, source, texts, owner)


def _gpupolicy(holder: EngineHolder, request: AdmissionRequest) -> AdmissionResponse:
    """A GPUPolicy object: the same loader and verdict as a policy ConfigMap's file (on top of the
    API server's own schema validation). An UPDATE that leaves the document as it was (labels,
    annotations) is not judged again; status is a subresource the webhook is not sent."""
    source, texts = gpupolicy_objects.texts_of(_require_object(request), request.name)
    old = request.old_object
    if isinstance(old, dict) and gpupolicy_objects.texts_of(old, request.name)[1] == texts:
        return AdmissionResponse(request.uid, True)
    return _policy_verdict(holder, request, source, texts, None)


def _policy_verdict(
    holder: EngineHolder, request: AdmissionRequest, source: str, texts: Texts, owner: str | None
) -> AdmissionResponse:
    """Lint's verdict on a source's files; a name another source's policy in force holds is said."""
    loaded = load_texts(texts, namespace=owner)
    if loaded.problems:
        message = "policy rejected: " + "; ".join(str(p) for p in loaded.problems)
        return AdmissionResponse(request.uid, False, message=message, code=422)
    # What lint would warn about loads, and `kubectl apply` shows it; so does a name another
    # source's policy holds: this one is kept out until that one goes (a policy moving from a
    # ConfigMap to a GPUPolicy object is applied first, then the old one deleted, with no gap).
    shadowed = [f"{p}; it takes over once that one is gone" for p in _clashes(holder, source, loaded.policies)]
    return AdmissionResponse(request.uid, True, warnings=(*shadowed, *(f"lint: {a}" for a in loaded.advice)))


def _clashes(holder: EngineHolder, source: str, policies: Any) -> list[PolicyProblem]:
    engine = holder.engine
    if engine is None:
        return []
    held = {
        p.name: p.source.file
        for p in engine.policy_set.policies
        if p.source.file != source and not p.source.file.startswith(source + "/")
    }
    return [name_clash(p, other) for p in policies if (other := held.get(p.name)) is not None]


def _env_source(holder: EngineHolder, request: AdmissionRequest) -> AdmissionResponse:
    """A ConfigMap or Secret: what envFrom would take from it (no budget is charged, so no
    reservation either)."""
    engine = holder.engine
    if engine is None:
        return AdmissionResponse(request.uid, True)
    raw = _require_object(request)
    with holder.engine_gate:
        decision = engine.validate(raw, holder.budgets, request.info(), holder.cluster)
    return AdmissionResponse(request.uid, decision.allowed, warnings=decision.warnings, message=decision.message)


def _replicas(raw: object, path: str) -> int:
    spec = raw.get("spec") if isinstance(raw, dict) else None
    count = spec.get("replicas", 0) if isinstance(spec, dict) else 0
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise InputError(f"{path}.spec.replicas", "must be a whole number, 0 or more")
    return count


def _scale(holder: EngineHolder, request: AdmissionRequest) -> AdmissionResponse:
    """A workload's Scale subresource (`kubectl scale`, an autoscaler): a scale-up gets its
    templates' verdict for the pods it adds. The Scale holds a count only, so the workload is
    read from the API server; one that cannot be read passes with a warning (its pods are still
    judged one by one as they are made)."""
    engine = holder.engine
    now, was = _replicas(_require_object(request), "object"), _replicas(request.old_object, "oldObject")
    if engine is None or now <= was:
        return AdmissionResponse(request.uid, True)
    group, version, plural = request.resource
    try:
        workload = holder.view.read_workload(group, version, plural, request.namespace, request.name)
    except Exception:
        log.exception("could not read a scaled workload", extra={"fields": {"uid": request.uid}})
        workload = None
    if workload is None:
        warning = f"gpu-admission: {plural} {request.namespace}/{request.name} could not be read; scale not judged"
        return AdmissionResponse(request.uid, True, warnings=(warning,))
    with holder.engine_gate:
        decision = engine.validate_scale(workload, was, now, holder.budgets, request.info(), holder.cluster)
    return AdmissionResponse(request.uid, decision.allowed, warnings=decision.warnings, message=decision.message)


def validate(holder: EngineHolder, request: AdmissionRequest) -> AdmissionResponse:
    if request.kind.group == gpupolicy_objects.GROUP and request.kind.kind == gpupolicy_objects.KIND:
        if request.operation not in JUDGED_OPERATIONS or request.sub_resource:
            return AdmissionResponse(request.uid, True)
        return _guarded("validate", holder, request, lambda: _gpupolicy(holder, request))
    if request.sub_resource == "scale" and request.operation is Operation.UPDATE:
        return _guarded("validate", holder, request, lambda: _scale(holder, request))
    if request.kind.group == "" and request.kind.kind in ENV_SOURCE_KINDS and request.operation in JUDGED_OPERATIONS:
        return _guarded("validate", holder, request, lambda: _configmap_or_secret(holder, request))
    engine = holder.engine
    if (
        engine is None
        or not engine.judges(request.kind.api_version, request.kind.kind)
        or request.operation not in JUDGED_OPERATIONS
        or request.sub_resource not in JUDGED_SUBRESOURCES
    ):
        return AdmissionResponse(request.uid, True)

    def run() -> AdmissionResponse:
        raw = _require_object(request)
        # Judged once, outside the counters' lock; only its budgets are judged under it.
        _read_namespace_first(holder, request)
        with holder.engine_gate:
            judged = engine.judge(raw, holder.budgets, request.info(), holder.cluster)
        decision = holder.admit(
            judged,
            request.namespace,
            request.name,
            raw,
            request.dry_run,
            update=request.operation is Operation.UPDATE,
        )
        answer = decision.answer
        return AdmissionResponse(
            request.uid,
            answer.allowed,
            warnings=answer.warnings,
            message=answer.message,
            audit_annotations=answer.audit_annotations,
        )

    return _guarded("validate", holder, request, run)
