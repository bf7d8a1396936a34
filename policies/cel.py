"""CEL expressions, compiled once at policy load with Google's C++ runtime (cel-expr-python).

Variables follow ValidatingAdmissionPolicy: `object` (the Pod or pod template as JSON) and
`request` (namespace, operation, userInfo, dryRun).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

_ENV = cel.NewEnv(variables={"object": cel.Type.DYN, "request": cel.Type.DYN})


class CelCompileError(ValueError):
    """The expression does not parse or type-check; the message is CEL's own, trimmed."""


class CelEvaluationError(RuntimeError):
    """Evaluation failed (missing field, wrong type): callers fail closed."""


class CelInput:
    """The variables of one admission request, converted into CEL values once for all its expressions.

    Converting a Pod into CEL costs about fifteen times an evaluation, so it is done lazily, once,
    and only for requests that meet an expression at all.
    """

    __slots__ = ("_data", "_activation")

    def __init__(self, data: Mapping[str, object] | Callable[[], Mapping[str, object]]) -> None:
        self._data = data
        self._activation: Any = None

    def activation(self) -> Any:
        if self._activation is None:
            data = self._data
            self._activation = _ENV.Activation(data if isinstance(data, Mapping) else data())
        return self._activation


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    source: str
    program: Any

    def evaluate(self, data: CelInput) -> object:
        value = self.program.eval(activation=data.activation())
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
    return CompiledExpression(source, program)


def _first_line(message: str) -> str:
    text = message.removeprefix("INVALID_ARGUMENT: ").removeprefix("ERROR: ")
    return text.splitlines()[0] if text else "invalid expression"
