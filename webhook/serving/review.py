"""AdmissionReview on the wire: typed in, typed out. Raw dicts stop here.

admission.k8s.io/v1 and v1beta1 are read alike and answered in the apiVersion they came in.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson

from policies.request import Operation, RequestInfo
from webhook.serving.errors import BadRequest

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


WARNING_LIMIT = 120


def short(text: str) -> str:
    """kubectl prints warnings on one line each and the API server wants them short; the CLI
    prints them whole."""
    return text if len(text) <= WARNING_LIMIT else text[: WARNING_LIMIT - 1] + "…"


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
            response["warnings"] = [short(w) for w in self.warnings]
        if not self.allowed:
            response["status"] = {
                "code": self.code,
                "message": self.message,
                "reason": "Forbidden",
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
    )
