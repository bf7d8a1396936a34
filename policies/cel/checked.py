"""A compiled CEL expression's syntax tree, as the compiler checked it: read from the
`cel.expr.CheckedExpr` it serializes (cel-expr-python's `Expression.serialize()`, a
`google.protobuf.Any`), never from the expression's text. String literals arrive as the compiler
decoded them (escapes, raw strings and either quote kind already resolved), so reading a term off
this tree cannot be fooled by spelling.

Only the protobuf wire format is read here (varints and length-delimited fields): the few message
types of cel-spec's `checked.proto` and `syntax.proto` the tree is made of. Fields this reader does
not know are skipped, as protobuf readers skip them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

# cel.expr.Expr's kinds (syntax.proto), by field number
_CONST, _IDENT, _SELECT, _CALL, _LIST, _STRUCT, _COMPREHENSION = 3, 4, 5, 6, 7, 8, 9
_CHECKED_EXPR = 4  # CheckedExpr.expr
_ANY_VALUE = 2  # google.protobuf.Any.value


class CheckedError(ValueError):
    """The bytes are not a checked expression this reader can read."""


class Node:
    """One node of the tree. `kind`: const, ident, select, call, list, struct or comprehension;
    `name`: an identifier's name, a selected field, a called function; `value`: a constant (str,
    int, float, bool, bytes or None); `args`: the operand of a select, the target (first, where
    `member`) and arguments of a call, a list's elements; `test_only`: a `has()` select."""

    __slots__ = ("kind", "name", "value", "args", "member", "test_only")

    def __init__(
        self,
        kind: str,
        name: str = "",
        value: object = None,
        args: tuple[Node, ...] = (),
        member: bool = False,
        test_only: bool = False,
    ) -> None:
        self.kind = kind
        self.name = name
        self.value = value
        self.args = args
        self.member = member
        self.test_only = test_only

    def __repr__(self) -> str:
        inner = ", ".join(repr(a) for a in self.args)
        return f"{self.kind}({self.name or self.value!r}{', ' if inner else ''}{inner})"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise CheckedError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message: a varint's int, a length-delimited bytes."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise CheckedError("truncated field")
            yield number, wire, data[pos : pos + size]
            pos += size
        elif wire == 1:
            yield number, wire, data[pos : pos + 8]
            pos += 8
        elif wire == 5:
            yield number, wire, data[pos : pos + 4]
            pos += 4
        else:
            raise CheckedError(f"wire type {wire} not read")


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise CheckedError("expected a length-delimited field")
    return value


def _text(value: int | bytes) -> str:
    return _bytes(value).decode("utf-8", "surrogateescape")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _constant(data: bytes) -> Node:
    for number, _, value in _fields(data):
        if number == 1:
            return Node("const", value=None)
        if number == 2 and isinstance(value, int):
            return Node("const", value=bool(value))
        if number == 3 and isinstance(value, int):
            return Node("const", value=_signed(value))
        if number == 4 and isinstance(value, int):
            return Node("const", value=value)
        if number == 5:
            return Node("const", value=float(struct.unpack("<d", _bytes(value))[0]))
        if number == 6:
            return Node("const", value=_text(value))
        if number == 7:
            return Node("const", value=_bytes(value))
    return Node("const", value=None)  # a duration or timestamp constant: read as unknown


def _select(data: bytes) -> Node:
    operand, name, test_only = None, "", False
    for number, _, value in _fields(data):
        if number == 1:
            operand = expression(_bytes(value))
        elif number == 2:
            name = _text(value)
        elif number == 3 and isinstance(value, int):
            test_only = bool(value)
    return Node("select", name, args=(operand,) if operand is not None else (), test_only=test_only)


def _call(data: bytes) -> Node:
    target, function, args = None, "", []
    for number, _, value in _fields(data):
        if number == 1:
            target = expression(_bytes(value))
        elif number == 2:
            function = _text(value)
        elif number == 3:
            args.append(expression(_bytes(value)))
    if target is not None:
        return Node("call", function, args=(target, *args), member=True)
    return Node("call", function, args=tuple(args))


def _comprehension(data: bytes) -> Node:
    parts = [expression(_bytes(value)) for number, _, value in _fields(data) if number in (2, 4, 5, 6, 7)]
    return Node("comprehension", args=tuple(parts))


def expression(data: bytes) -> Node:
    """A cel.expr.Expr message."""
    for number, _, value in _fields(data):
        if number == _CONST:
            return _constant(_bytes(value))
        if number == _IDENT:
            name = next((_text(v) for n, _, v in _fields(_bytes(value)) if n == 1), "")
            return Node("ident", name)
        if number == _SELECT:
            return _select(_bytes(value))
        if number == _CALL:
            return _call(_bytes(value))
        if number == _LIST:
            return Node("list", args=tuple(expression(_bytes(v)) for n, _, v in _fields(_bytes(value)) if n == 1))
        if number == _STRUCT:
            return Node("struct")
        if number == _COMPREHENSION:
            return _comprehension(_bytes(value))
    raise CheckedError("an expression of no kind")


def checked_tree(serialized: bytes) -> Node:
    """The tree of a compiled expression, from `Expression.serialize()`."""
    checked = next((_bytes(v) for n, _, v in _fields(serialized) if n == _ANY_VALUE), None)
    if checked is None:
        raise CheckedError("not a google.protobuf.Any")
    tree = next((_bytes(v) for n, _, v in _fields(checked) if n == _CHECKED_EXPR), None)
    if tree is None:
        raise CheckedError("no expression in the checked expression")
    return expression(tree)
