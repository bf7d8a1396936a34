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
