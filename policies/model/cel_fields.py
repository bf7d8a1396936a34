"""Which top-level fields of `object` a CEL expression can read, found from its tokens.

Converting a whole Pod into CEL values is most of what a rule costs (about 200,000 instructions
of a 850,000-instruction /validate for `'team' in object.metadata.labels`), while rules read a
field or two. An expression whose every use of `object` is a plain field selection,
`object.<field>` not called as a method, gets only those fields; any other use (`object[...]`,
`object.?f`, `object.size()`, `.object`, `object` alone or as a macro variable) gets the whole
object. The answer is conservative by construction: a token it does not understand keeps
everything.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<raw>(?:[rR][bB]?|[bB][rR])(?:'''.*?'''|\"\"\".*?\"\"\"|'[^'\n]*'|"[^"\n]*"))
  | (?P<string>[bB]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^\\'\n])*'|"(?:\\.|[^\\"\n])*"))
  | (?P<quoted>`[^`]*`)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_VARIABLE = "object"


def tokens(source: str, keep_literals: bool = False) -> list[str] | None:
    """CEL tokens without spaces and comments; string literals as '""' unless `keep_literals`."""
    out: list[str] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:  # never: the last alternative takes any character
            return None
        position = match.end()
        kind, text = match.lastgroup, match.group()
        if kind == "space":
            continue
        if kind in ("raw", "string", "quoted") and not keep_literals:
            if _VARIABLE in text:
                return None  # were the literal misread, what it swallowed could use `object`
            text = '""'  # opaque: a literal never names a variable
        out.append(text)
    return out


def names_variable(source: str, variable: str) -> bool:
    """Whether the expression may name `variable` (True when its tokens cannot be told)."""
    return names_in(tokens(source), variable)


def names_in(found: list[str] | None, variable: str) -> bool:
    """names_variable over tokens already made."""
    return found is None or variable in found


def object_fields(source: str) -> frozenset[str] | None:
    """The fields of `object` the expression selects, or None when it may read more of it."""
    return fields_in(tokens(source))


def fields_in(found: list[str] | None) -> frozenset[str] | None:
    """object_fields over tokens already made."""
    if found is None:
        return None
    fields: set[str] = set()
    for i, token in enumerate(found):
        if token != _VARIABLE:
            continue
        if i > 0 and found[i - 1] == ".":
            return None  # `x.object` or the root-scoped `.object`: not worth telling apart
        selected = found[i + 1 : i + 4]
        if len(selected) < 2 or selected[0] != "." or not selected[1].isidentifier():
            return None
        if len(selected) == 3 and selected[2] == "(":
            return None  # a method on the whole object
        fields.add(selected[1])
    return frozenset(fields)


LABELS_PATH = ("metadata", "labels")
FieldPath = tuple[str, ...]


def required_label(source: str) -> tuple[str, str] | None:
    """A label the expression is false without (`required_field` on a label): `(key, value)`."""
    found = required_field(source)
    if found is None or len(found[0]) != 3 or found[0][:2] != LABELS_PATH:
        return None
    return found[0][2], found[1]


def required_field(source: str) -> tuple[FieldPath, str] | None:
    """A field of `object` the expression is false without: `(path, value)` where one of its
    top-level `&&` operands is `object.<path> == 'value'` (each step `.name` or `['key']`, either
    side; a label, the pod's name, an annotation), and it has no top-level `||` or `?:`. An object
    whose field holds another string makes that operand, and so the whole expression, false (CEL's
    `&&` is false with any false operand, errors in the others included). None when no such
    operand can be told; an object without the field, or with a value that is no string there, is
    not decided by this (the operand is an error then, not false)."""
    found = tokens(source, keep_literals=True)
    if found is None:
        return None
    operands: list[list[str]] = [[]]
    depth = 0
    for i, token in enumerate(found):
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth -= 1
        elif depth == 0 and token in ("|", "?"):
            return None
        elif depth == 0 and token == "&" and i + 1 < len(found) and found[i + 1] == "&":
            operands.append([])
            continue
        elif depth == 0 and token == "&" and i > 0 and found[i - 1] == "&":
            continue
        operands[-1].append(token)
    for operand in operands:
        pair = _field_equality(operand)
        if pair is not None:
            return pair
    return None


def _field_equality(operand: list[str]) -> tuple[FieldPath, str] | None:
    for left, right in ((operand[:-3], operand[-3:]), (operand[3:], operand[:3])):
        if len(right) != 3 or right[0:2] != ["=", "="] and right[1:3] != ["=", "="]:
            continue
        value = _plain_string(right[2] if right[0] == "=" else right[0])
        path = _field_path(left)
        if value is not None and path:
            return path, value
    return None


def _field_path(selection: list[str]) -> FieldPath | None:
    """The keys of `object.a.b['c']` (None for anything else: a call, an index by number, an
    operator)."""
    if not selection or selection[0] != "object":
        return None
    path: list[str] = []
    rest = selection[1:]
    while rest:
        if len(rest) >= 2 and rest[0] == "." and rest[1].isidentifier():
            path.append(rest[1])
            rest = rest[2:]
        elif len(rest) >= 3 and rest[0] == "[" and rest[2] == "]" and (key := _plain_string(rest[1])) is not None:
            path.append(key)
            rest = rest[3:]
        else:
            return None
    return tuple(path)


def _plain_string(token: str) -> str | None:
    """The value of a one-quoted string literal without escapes (None for any other token)."""
    plain = len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"" and "\\" not in token
    return token[1:-1] if plain and not token.startswith(("'''", '"""')) else None
