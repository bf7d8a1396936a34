"""CEL expressions, compiled once at policy load with Google's C++ runtime (cel-expr-python).

Variables follow ValidatingAdmissionPolicy: `object` (the Pod or pod template as JSON),
`oldObject` (UPDATE), `request` (namespace, operation, userInfo, dryRun), `namespaceObject`
(the namespace's name and labels where the webhook knows them, else null) and `variables` (the
policy's `spec.variables`, each computed once per request). The strings and optional extensions
and the Kubernetes libraries of policies.cel.library are declared.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext.ext_optional import ExtOptional
from cel_expr_python.ext.ext_strings import ExtStrings

from policies.cel.library import functions
from policies.model.cel_fields import fields_in, names_in, tokens

VARIABLES = ("object", "oldObject", "request", "namespaceObject", "variables")
_ENV = cel.NewEnv(
    variables={name: cel.Type.DYN for name in VARIABLES},
    extensions=[ExtStrings(), ExtOptional()],
    functions=functions(),
)
Variables = tuple[tuple[str, "CompiledExpression"], ...]  # a policy's spec.variables, in order


class CelCompileError(ValueError):
    """The expression does not parse or type-check; the message is CEL's own, trimmed."""


class CelEvaluationError(Exception):  # not RuntimeError: mypyc compiles subclasses of Exception and ValueError
    """Evaluation failed (missing field, wrong type): callers fail closed."""


_MISSING = object()


class CelInput:
    """The variables of one admission request, converted into CEL values once per set of fields.

    Converting a Pod into CEL costs about fifteen times an evaluation, so it is done lazily, only
    for requests that meet an expression at all, and with only the top-level fields of `object`
    the expression can read (policies.model.cel_fields), the whole object when that is not known.
    """

    __slots__ = ("_data", "_activations", "_variables", "_results")

    def __init__(self, data: Mapping[str, object] | Callable[[], Mapping[str, object]]) -> None:
        self._data = data
        self._activations: dict[tuple[frozenset[str] | None, bool], Any] = {}
        self._variables: dict[int, dict[str, object]] = {}
        # Results of expressions that read no policy's variables, by source: ten policies with the
        # same rule text evaluate it once a request (a failure is kept too, and raised again).
        self._results: dict[str, object] = {}

    def once(self, expression: CompiledExpression) -> object:
        """The value of `expression` (one that reads no policy's variables), once per request
        for each expression source."""
        found = self._results.get(expression.source, _MISSING)
        if found is _MISSING:
            try:
                found = expression.evaluate_with(self, None)
            except CelEvaluationError as error:
                found = error
            self._results[expression.source] = found
        if isinstance(found, CelEvaluationError):
            raise found
        return found

    def _input(self, fields: frozenset[str] | None, old: bool) -> Mapping[str, object]:
        data = self._data
        if callable(data):
            data = self._data = data()
        obj = data.get("object")
        if fields is not None and type(obj) is dict:
            data = {**data, "object": {k: obj[k] for k in fields if k in obj}}
        if not old and data.get("oldObject") is not None:
            # Converting the old pod costs as much as the pod: only for expressions that read it.
            data = {**data, "oldObject": None}
        return data

    def activation(
        self, fields: frozenset[str] | None = None, old: bool = False, variables: Mapping[str, object] | None = None
    ) -> Any:
        """Variables for an expression reading `fields` of object (all: None), oldObject if `old`,
        and the policy's computed `variables` if it reads them (those activations are not kept:
        their values differ by policy)."""
        if variables is not None:
            return _ENV.Activation({**self._input(fields, old), "variables": dict(variables)})
        activation = self._activations.get((fields, old))
        if activation is None:
            activation = self._activations[(fields, old)] = _ENV.Activation(self._input(fields, old))
        return activation

    def variable_values(self, variables: Variables) -> Mapping[str, object]:
        """A policy's variables, each computed once per request, in order (a later one may read
        an earlier one); one that fails is left out, so an expression reading it fails too."""
        key = id(variables)
        values = self._variables.get(key)
        if values is None:
            values = self._variables[key] = {}
            for name, expression in variables:
                with contextlib.suppress(CelEvaluationError):
                    values[name] = expression.evaluate_with(self, values if expression.reads_variables else None)
        return values


@dataclass(frozen=True, slots=True)
class CompiledExpression:
    source: str
    program: Any
    object_fields: frozenset[str] | None = None  # None: the whole object
    reads_old: bool = False  # names oldObject
    reads_variables: bool = False  # names variables

    def evaluate(self, data: CelInput, variables: Variables = ()) -> object:
        if self.reads_variables and variables:  # the policy's own values: not shared with others
            return self.evaluate_with(data, data.variable_values(variables))
        return data.once(self)

    def evaluate_with(self, data: CelInput, values: Mapping[str, object] | None) -> object:
        value = self.program.eval(activation=data.activation(self.object_fields, self.reads_old, values))
        if value.type() == cel.Type.ERROR:
            raise CelEvaluationError(str(value.plain_value()))
        return value.plain_value()

    def evaluate_bool(self, data: CelInput, variables: Variables = ()) -> bool:
        if self.reads_variables and variables:
            result = self.evaluate_with(data, data.variable_values(variables))
        else:  # evaluate's common case, inline: run for every rule of every matching policy
            result = data.once(self)
        if not isinstance(result, bool):
            raise CelEvaluationError(f"expected a bool, got {type(result).__name__}")
        return result


@lru_cache(maxsize=4096)
def compile_expression(source: str) -> CompiledExpression:
    """Compiled once per text: policies made from one template repeat their expressions, and a
    compiled expression is immutable (CelCompileError, raised, is not kept)."""
    try:
        program = _ENV.compile(source)
    except RuntimeError as error:
        raise CelCompileError(_first_line(str(error))) from None
    found = tokens(source)  # once, for the three questions asked of them
    return CompiledExpression(
        source, program, fields_in(found), names_in(found, "oldObject"), names_in(found, "variables")
    )


def _first_line(message: str) -> str:
    text = message.removeprefix("INVALID_ARGUMENT: ").removeprefix("ERROR: ")
    return text.splitlines()[0] if text else "invalid expression"
