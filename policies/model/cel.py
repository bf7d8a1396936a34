"""CEL expressions, compiled once at policy load with Google's C++ runtime (cel-expr-python).

Variables follow ValidatingAdmissionPolicy: `object` (the Pod or pod template as JSON) and
`request` (namespace, operation, userInfo, dryRun).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from policies.model.cel_fields import names_variable, object_fields

_ENV = cel.NewEnv(variables={"object": cel.Type.DYN, "oldObject": cel.Type.DYN, "request": cel.Type.DYN})


class CelCompileError(ValueError):
    """The expression does not parse or type-check; the message is CEL's own, trimmed."""


class CelEvaluationError(RuntimeError):
    """Evaluation failed (missing field, wrong type): callers fail closed."""


class CelInput:
    """The variables of one admission request, converted into CEL values once per set of fields.

    Converting a Pod into CEL costs about fifteen times an evaluation, so it is done lazily, only
    for requests that meet an expression at all, and with only the top-level fields of `object`
    the expression can read (policies.model.cel_fields), the whole object when that is not known.
    """

    __slots__ = ("_data", "_activations")

    def __init__(self, data: Mapping[str, object] | Callable[[], Mapping[str, object]]) -> None:
        self._data = data
        self._activations: dict[tuple[frozenset[str] | None, bool], Any] = {}

    def activation(self, fields: frozenset[str] | None = None, old: bool = False) -> Any:
        """Variables for an expression reading `fields` of object (all: None), and oldObject if `old`."""
        activation = self._activations.get((fields, old))
        if activation is None:
            data = self._data
            if not isinstance(data, Mapping):
                data = self._data = data()
            obj = data.get("object")
            if fields is not None and isinstance(obj, Mapping):
                data = {**data, "object": {k: obj[k] for k in fields if k in obj}}
            if not old and data.get("oldObject") is not None:
                # Converting the old pod costs as much as the pod: only for expressions that read it.
                data = {**data, "oldObject": None}
            activation = self._activations[(fields, old)] = _ENV.Activation(data)
        return activation


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    source: str
    program: Any
    object_fields: frozenset[str] | None = None  # None: the whole object
    reads_old: bool = False  # names oldObject

    def evaluate(self, data: CelInput) -> object:
        value = self.program.eval(activation=data.activation(self.object_fields, self.reads_old))
        if value.type() == cel.Type.ERROR:
            raise CelEvaluationError(str(value.plain_value()))
        return value.plain_value()

    def evaluate_bool(self, data: CelInput) -> bool:
        result = self.evaluate(data)
        if not isinstance(result, bool):
            raise CelEvaluationError(f"expected a bool, got {type(result).__name__}")
        return result


def compile_expression(source: str) -> CompiledExpression:
    try:
        program = _ENV.compile(source)
    except RuntimeError as error:
        raise CelCompileError(_first_line(str(error))) from None
    return CompiledExpression(source, program, object_fields(source), names_variable(source, "oldObject"))


def _first_line(message: str) -> str:
    text = message.removeprefix("INVALID_ARGUMENT: ").removeprefix("ERROR: ")
    return text.splitlines()[0] if text else "invalid expression"
