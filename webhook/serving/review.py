"""AdmissionReview on the wire: typed in, typed out. Raw dicts stop here.

admission.k8s.io/v1 and v1beta1 are read alike and answered in the apiVersion they came in.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson

from policies import Operation, RequestInfo
from webhook.serving.http_errors import BadRequest

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


# NamedTuples, not frozen dataclasses: as immutable, and built on every review for a quarter of
# the cost (a frozen dataclass sets each field through object.__setattr__).
class GroupVersionKind(NamedTuple):
    group: str
    version: str
    kind: str

    @property
    def is_core_pod(self) -> bool:
        return self.group == "" and self.kind == "Pod"

    @property
    def api_version(self) -> str:
        """As an object of this kind writes it: `group/version`, or `version` in the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version


class GroupVersionResource(NamedTuple):
    """The resource asked for (`request.resource`): for a subresource, its parent's
    (`apps/v1 deployments` for `deployments/scale`, whose kind is autoscaling/v1 Scale)."""

    group: str = ""
    version: str = ""
    resource: str = ""


NO_RESOURCE = GroupVersionResource()


class AdmissionRequest(NamedTuple):
    api_version: str
    uid: str
    kind: GroupVersionKind
    operation: Operation
    namespace: str
    name: str
    dry_run: bool
    object: Any
    sub_resource: str = ""
    old_object: Any = None
    username: str = ""
    groups: tuple[str, ...] = ()
    resource: GroupVersionResource = NO_RESOURCE

    @property
    def display_name(self) -> str:
        """The request's name, else the object's (pods created by controllers have only a generateName)."""
        if self.name or not isinstance(self.object, dict):
            return self.name
        metadata = self.object.get("metadata")
        if not isinstance(metadata, dict):
            return ""
        return str(metadata.get("name") or metadata.get("generateName") or "")

    def info(self) -> RequestInfo:
        return RequestInfo(
            self.namespace,
            self.operation,
            self.dry_run,
            self.uid,
            self.username,
            self.groups,
            self.sub_resource,
            self.old_object if isinstance(self.old_object, dict) else None,
        )


# What the API server passes on of a webhook's warnings (k8s.io/apiserver endpoints/filters
# warning.go, apimachinery util/net NewWarningHeader): a warning holding a control character is
# dropped without a word, each is cut at 256 runes and all of them at 4,096.
WARNING_RUNES = 256
WARNINGS_TOTAL_RUNES = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
_SPACES = re.compile(r"\s{2,}")


def one_line(text: str) -> str:
    """A warning as kubectl can show it: control characters (line breaks of a multi-line policy
    message among them) become single spaces, and it is cut at 256 runes."""
    text = _SPACES.sub(" ", _CONTROL.sub(" ", text)).strip()
    return text if len(text) <= WARNING_RUNES else text[: WARNING_RUNES - 1] + "…"


# Most important first, so what the 4,096-rune budget cuts is the least of them: what will be
# denied (a dry run's preview, an engine fault allowed by failOpen), a policy that could not be
# judged, budgets, rules, then notes of what the mutation did or left alone. Order holds within each.
_IMPORTANCE = (
    lambda w: w.startswith(("will be denied", "gpu-admission: internal error")),
    lambda w: w.startswith("policy ") and " skipped: " in w,
    lambda w: "[rule quota." in w,
    lambda w: "[rule " in w,
)


def importance(warning: str) -> int:
    return next((rank for rank, test in enumerate(_IMPORTANCE) if test(warning)), len(_IMPORTANCE))


def shown_warnings(warnings: tuple[str, ...]) -> list[str]:
    """Each warning on one line, most important first, within 4,096 runes in all; what does not
    fit is counted in a last warning instead of being cut away by the API server unseen."""
    shown: list[str] = []
    total = 0
    lines = sorted((one_line(w) for w in warnings), key=importance)
    for index, line in enumerate(lines):
        room_for_the_count = 0 if index == len(lines) - 1 else 64
        if total + len(line) + room_for_the_count > WARNINGS_TOTAL_RUNES:
            shown.append(f"gpu-admission: and {len(lines) - index} more warnings")
            break
        shown.append(line)
        total += len(line)
    return shown


_REASONS = {400: "BadRequest", 403: "Forbidden", 422: "Invalid", 500: "InternalError"}


class AdmissionResponse(NamedTuple):
    uid: str
    allowed: bool
    patch: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    message: str = ""
    code: int = 403
    audit_annotations: Mapping[str, str] = MappingProxyType({})

    def to_review(self, api_version: str) -> dict[str, Any]:
        response: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if self.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(orjson.dumps(self.patch)).decode()
        if self.warnings:
            response["warnings"] = shown_warnings(self.warnings)
        if not self.allowed:
            response["status"] = {
                "code": self.code,
                "message": self.message,
                "reason": _REASONS.get(self.code, "Forbidden"),
                "status": "Failure",
            }
        if self.audit_annotations:
            response["auditAnnotations"] = dict(self.audit_annotations)
        return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}


def _string(raw: dict[str, Any], key: str, required: bool = False) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise BadRequest(f"request.{key} must be a non-empty string" if required else f"request.{key} must be a string")
    return value


def parse_review(body: Any) -> AdmissionRequest:
    """An AdmissionRequest from a decoded JSON body, or BadRequest naming what is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("body must be an AdmissionReview object")
    api_version = body.get("apiVersion")
    if api_version not in API_VERSIONS or body.get("kind") != "AdmissionReview":
        raise BadRequest(f"expected kind AdmissionReview of {' or '.join(API_VERSIONS)}")
    request = body.get("request")
    if not isinstance(request, dict):
        raise BadRequest("AdmissionReview has no request")
    uid = _string(request, "uid", required=True)
    kind: Any = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str):
        raise BadRequest("request.kind must be a group/version/kind object")
    try:
        operation = Operation(request.get("operation"))
    except ValueError:
        raise BadRequest("request.operation must be CREATE, UPDATE, DELETE or CONNECT") from None
    user: Any = request.get("userInfo")
    if not isinstance(user, dict):
        user = {}
    groups: Any = user.get("groups")
    if not isinstance(groups, list):
        groups = []
    return AdmissionRequest(
        api_version=str(api_version),
        uid=uid,
        kind=GroupVersionKind(str(kind.get("group") or ""), str(kind.get("version") or ""), kind["kind"]),
        operation=operation,
        namespace=_string(request, "namespace"),
        name=_string(request, "name"),
        dry_run=request.get("dryRun") is True,
        object=request.get("object"),
        old_object=request.get("oldObject"),
        sub_resource=_string(request, "subResource"),
        username=str(user.get("username") or ""),
        groups=tuple(str(g) for g in groups),
        resource=_resource(request.get("resource")),
    )


def _resource(raw: Any) -> GroupVersionResource:
    if not isinstance(raw, dict):
        return NO_RESOURCE
    return GroupVersionResource(*(str(raw.get(key) or "") for key in ("group", "version", "resource")))
