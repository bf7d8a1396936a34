"""What the engine knows of the admission request, apart from the object itself."""

from __future__ import annotations

import enum
from typing import NamedTuple

from policies.model.cel import CelInput


class Operation(enum.Enum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


# A NamedTuple, not a frozen dataclass: as immutable, and built on every review for a quarter of
# the cost (a frozen dataclass sets each field through object.__setattr__).
class RequestInfo(NamedTuple):
    namespace: str = ""
    operation: Operation = Operation.CREATE
    dry_run: bool = False
    uid: str = ""
    username: str = ""
    groups: tuple[str, ...] = ()

    def in_namespace(self, namespace: str) -> RequestInfo:
        return self if namespace == self.namespace else self._replace(namespace=namespace)

    def cel_input(self, obj: object) -> CelInput:
        """`object` and `request` for CEL, built only if an expression is evaluated."""
        return CelInput(lambda: {"object": obj, "request": self.cel_view()})

    def cel_view(self) -> dict[str, object]:
        """`request` as CEL rules see it (the fields ValidatingAdmissionPolicy rules use most)."""
        return {
            "namespace": self.namespace,
            "operation": self.operation.value,
            "dryRun": self.dry_run,
            "uid": self.uid,
            "userInfo": {"username": self.username, "groups": list(self.groups)},
        }
