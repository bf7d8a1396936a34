"""The engine's two error families, kept apart all the way to the edge.

`InputError`: the object sent is malformed (the edge answers 4xx or exit 2).
`PolicyProblem`: a policy document is wrong (lint error, load error); never about a request.
A policy *verdict* is not an error at all: it is a Decision with allowed=False.
"""

from __future__ import annotations

from dataclasses import dataclass


class InputError(ValueError):
    """A malformed object: the message names the document and the field path."""

    def __init__(self, path: str, message: str, document: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.document = document

    def __str__(self) -> str:
        where = f"{self.document}: " if self.document else ""
        return f"{where}{self.path}: {self.message}" if self.path else f"{where}{self.message}"

    def in_document(self, document: str) -> InputError:
        return InputError(self.path, self.message, document)


@dataclass(frozen=True, slots=True)
class PolicyProblem:
    file: str
    line: int
    policy: str
    path: str
    message: str

    def __str__(self) -> str:
        who = f"policy {self.policy}: " if self.policy else ""
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}:{self.line}: {who}{where}{self.message}"
