"""What the engine knows of the admission request, apart from the object itself."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from functools import partial
from typing import Any, NamedTuple

from policies.model.cel import CelInput

NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"


class Operation(enum.Enum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


# Made once a review and taken apart by its callers: a NamedTuple (the value-class rule,
# docs/architecture.md).
class RequestInfo(NamedTuple):
    """What the API server says of the request. Of all a review carries, only this (userInfo, the
    operation, the namespace) is not written by the requester; the object and oldObject are."""

    namespace: str = ""
    operation: Operation = Operation.CREATE
    dry_run: bool = False
    uid: str = ""
    username: str = ""
    groups: tuple[str, ...] = ()
    sub_resource: str = ""
    old_object: Any = None  # UPDATE: the object as it was

    def in_namespace(self, namespace: str) -> RequestInfo:
        return self if namespace == self.namespace else self._replace(namespace=namespace)

    @property
    def from_node(self) -> bool:
        """Sent by a kubelet (the only caller that may make mirror pods of static pods)."""
        return self.username.startswith(NODE_USER_PREFIX) and NODES_GROUP in self.groups

    def cel_input(self, obj: object, namespace_labels: Mapping[str, str] | None = None) -> CelInput:
        """`object`, `oldObject`, `request` and `namespaceObject` (its name and labels, where known)
        for CEL, built only if an expression is evaluated."""
        # A partial, not a lambda: mypyc cannot compile a closure inside a NamedTuple's method.
        return CelInput(partial(_cel_document, self, obj, namespace_labels))

    def cel_view(self) -> dict[str, object]:
        """`request` as CEL rules see it (the fields ValidatingAdmissionPolicy rules use most)."""
        return {
            "namespace": self.namespace,
            "operation": self.operation.value,
            "dryRun": self.dry_run,
            "uid": self.uid,
            "userInfo": {"username": self.username, "groups": list(self.groups)},
        }


def _cel_document(request: RequestInfo, obj: object, namespace_labels: Mapping[str, str] | None) -> dict[str, object]:
    return {
        "object": obj,
        "oldObject": request.old_object,
        "request": request.cel_view(),
        "namespaceObject": None
        if namespace_labels is None
        else {"metadata": {"name": request.namespace, "labels": dict(namespace_labels)}},
    }
