"""The Kubernetes CEL libraries that cel-expr-python can host, as custom functions.

ValidatingAdmissionPolicy's CEL adds to CEL's standard library (and the strings and optional
extensions, which cel-expr-python ships and cel.py enables) the libraries of
k8s.io/apiserver/pkg/cel/library. Hosted here, with the same names and results:

  lists     <list>.isSorted(), .sum(), .min(), .max()
  sets      sets.contains(a, b), sets.equivalent(a, b), sets.intersects(a, b)
  regex     <string>.find(re), .findAll(re), .findAll(re, n)
  url       url(s), isURL(s), <url>.getScheme(), getHost(), getHostname(), getPort(),
            getEscapedPath(), getQuery()
  quantity  quantity(s), isQuantity(s), sign(<quantity>), <quantity>.isInteger(), asInteger(),
            asApproximateFloat(), add(q | int), sub(q | int), isGreaterThan(q), isLessThan(q),
            compareTo(q)
  semver    semver(s), semver(s, normalize), isSemver(s), isSemver(s, normalize), <semver>.major(),
            minor(), patch(), isGreaterThan(v), isLessThan(v), compareTo(v)

One difference, from what the Python binding can carry: cel-expr-python cannot give Python
values a CEL type of their own, so a URL, a Quantity and a Semver are strings, checked when made
(`quantity('1Gi') == '1Gi'` is true for rules, a type error in Kubernetes; any expression
Kubernetes accepts means the same here). `compareTo`, `isGreaterThan` and `isLessThan` compare two
versions where both are one (no quantity is: a version has two dots), else two quantities. How a
quantity is carried is the environment's choice (`functions(values=...)`): as written for rules
(`AS_WRITTEN`), or as the exact decimal of its value (`BY_VALUE`) for DRA's device selectors,
where Kubernetes compares capacities as quantities: `quantity('80Gi') == quantity('81920Mi')`.
`<quantity>.sign()` is accepted here too (rules were written so before `sign(<quantity>)`, the
API server's form, was offered); the API server refuses it.
Regular expressions are Python's `re`, which agrees with RE2 on the syntax policies use (RE2
has no backreferences or lookaround; `re` accepts them).
Not available: `authorizer` (needs the API server), the ip/cidr libraries, and the
lists library's `indexOf`/`lastIndexOf` on lists (the binding cannot add overloads to the strings
extension's `indexOf`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cel_expr_python import cel

from policies.cel.semver import SemverError, compare, is_version, normalized, parse
from policies.quantity import parse_quantity

T = cel.Type
DYN_LIST = T.List(T.DYN)
_MAX_INT = 2**63 - 1


def _quantity(text: str) -> Decimal:
    try:
        return parse_quantity(text)
    except (ValueError, ArithmeticError):
        raise ValueError(f"quantities must match the regular expression for Kubernetes quantities: {text!r}") from None


def _format(value: Decimal) -> str:
    """A quantity as Kubernetes would print it, for the values arithmetic can make."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(value.normalize(), "f")


def _as_integer(text: str) -> int:
    value = _quantity(text)
    if value != value.to_integral_value() or abs(value) > _MAX_INT:
        raise ValueError(f"cannot convert value to integer: {text}")
    return int(value)


def by_value(value: Decimal) -> str:
    """A quantity as the exact decimal of its value: equal quantities, equal strings."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


AS_WRITTEN: Callable[[Decimal], str] | None = None  # rules: a quantity is the text it was made from
BY_VALUE: Callable[[Decimal], str] | None = by_value  # DRA selectors: a quantity is its value


def _compare(a: str, b: str) -> int:
    if is_version(a) and is_version(b):
        return compare(parse(a), parse(b))
    x, y = _quantity(a), _quantity(b)
    return (x > y) - (x < y)


def _semver(text: str, normalize: bool = False) -> str:
    try:
        return (normalized(text) if normalize else parse(text)).canonical
    except SemverError as error:
        raise ValueError(f"string {text!r} cannot be converted to a semver: {error}") from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _semver(text, normalize)
    except ValueError:
        return False
    return True


def _part(text: str, index: int) -> int:
    version = parse(_semver(text))
    return (version.major, version.minor, version.patch)[index]


def _sign(text: str) -> int:
    value = _quantity(text)
    return (value > 0) - (value < 0)


def _is_quantity(text: str) -> bool:
    try:
        _quantity(text)
    except ValueError:
        return False
    return True


def _url(text: str) -> str:
    if not _is_url(text):
        raise ValueError(f"URL parse error during conversion from string: {text!r}")
    return text


def _is_url(text: str) -> bool:
    # Go's url.ParseRequestURI: an absolute URL or an absolute path, no fragment.
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return "#" not in text and (bool(parts.scheme) or text.startswith("/"))


def _port(text: str) -> str:
    netloc = urlsplit(text).netloc.rpartition("@")[2]
    host, _, port = netloc.rpartition(":") if not netloc.endswith("]") else (netloc, "", "")
    return port if host else ""


def _hostname(text: str) -> str:
    return urlsplit(text).hostname or ""


def _ordered(items: Sequence[Any]) -> bool:
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _extreme(items: Sequence[Any], pick: Any) -> Any:
    if not items:
        raise ValueError("min/max of an empty list")
    return pick(items)


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, text)]
    return found if limit < 0 else found[:limit]


def _find(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    return match.group(0) if match else ""


def _member(result: Any, params: list[Any], impl: Any, overload: str) -> cel.Overload:
    return cel.Overload(overload, result, params, True, impl)


def _global(result: Any, params: list[Any], impl: Any, overload: str) -> cel.Overload:
    return cel.Overload(overload, result, params, False, impl)


def functions(values: Callable[[Decimal], str] | None = AS_WRITTEN) -> list[cel.FunctionDecl]:
    """The libraries' functions; `values`: how a quantity made here is carried (AS_WRITTEN, BY_VALUE)."""
    S, N, B, D = T.STRING, T.INT, T.BOOL, T.DOUBLE
    carry = _format if values is None else values

    def made(text: str) -> str:
        value = _quantity(text)
        return text if values is None else values(value)

    table: dict[str, list[cel.Overload]] = {
        # lists
        "isSorted": [_member(B, [DYN_LIST], lambda xs: _ordered(list(xs)), "list_is_sorted")],
        "sum": [_member(T.DYN, [DYN_LIST], lambda xs: sum(xs), "list_sum")],
        "min": [_member(T.DYN, [DYN_LIST], lambda xs: _extreme(list(xs), min), "list_min")],
        "max": [_member(T.DYN, [DYN_LIST], lambda xs: _extreme(list(xs), max), "list_max")],
        # sets
        "sets.contains": [_global(B, [DYN_LIST, DYN_LIST], lambda a, b: all(x in a for x in b), "sets_contains")],
        "sets.equivalent": [
            _global(B, [DYN_LIST, DYN_LIST], lambda a, b: all(x in a for x in b) and all(x in b for x in a), "sets_eq")
        ],
        "sets.intersects": [_global(B, [DYN_LIST, DYN_LIST], lambda a, b: any(x in a for x in b), "sets_intersects")],
        # regex
        "find": [_member(S, [S, S], _find, "string_find")],
        "findAll": [
            _member(T.List(S), [S, S], _find_all, "string_find_all"),
            _member(T.List(S), [S, S, N], _find_all, "string_find_all_n"),
        ],
        # url
        "url": [_global(S, [S], _url, "string_to_url")],
        "isURL": [_global(B, [S], _is_url, "is_url")],
        "getScheme": [_member(S, [S], lambda u: urlsplit(u).scheme, "url_scheme")],
        "getHost": [_member(S, [S], lambda u: urlsplit(u).netloc.rpartition("@")[2], "url_host")],
        "getHostname": [_member(S, [S], _hostname, "url_hostname")],
        "getPort": [_member(S, [S], _port, "url_port")],
        "getEscapedPath": [_member(S, [S], lambda u: urlsplit(u).path, "url_path")],
        "getQuery": [
            _member(T.Map(S, T.List(S)), [S], lambda u: parse_qs(urlsplit(u).query), "url_query"),
        ],
        # quantity
        "quantity": [_global(S, [S], made, "string_to_quantity")],
        "isQuantity": [_global(B, [S], _is_quantity, "is_quantity")],
        # sign(q), as the API server declares it (a global overload, though its docs write
        # q.sign(), which it refuses); q.sign() kept for the rules written so before
        "sign": [
            _global(N, [S], _sign, "quantity_sign"),
            _member(N, [S], _sign, "quantity_sign_member"),
        ],
        "isInteger": [_member(B, [S], lambda q: _is_integral(q), "quantity_is_integer")],
        "asInteger": [_member(N, [S], _as_integer, "quantity_as_integer")],
        "asApproximateFloat": [_member(D, [S], lambda q: float(_quantity(q)), "quantity_as_float")],
        "add": [
            _member(S, [S, S], lambda a, b: carry(_quantity(a) + _quantity(b)), "quantity_add"),
            _member(S, [S, N], lambda a, b: carry(_quantity(a) + b), "quantity_add_int"),
        ],
        "sub": [
            _member(S, [S, S], lambda a, b: carry(_quantity(a) - _quantity(b)), "quantity_sub"),
            _member(S, [S, N], lambda a, b: carry(_quantity(a) - b), "quantity_sub_int"),
        ],
        "isGreaterThan": [_member(B, [S, S], lambda a, b: _compare(a, b) > 0, "quantity_gt")],
        "isLessThan": [_member(B, [S, S], lambda a, b: _compare(a, b) < 0, "quantity_lt")],
        "compareTo": [_member(N, [S, S], _compare, "quantity_compare")],
        # semver (its comparisons are the quantity's three above, which tell the two apart)
        "semver": [
            _global(S, [S], _semver, "string_to_semver"),
            _global(S, [S, B], _semver, "string_bool_to_semver"),
        ],
        "isSemver": [_global(B, [S], _is_semver, "is_semver_string"), _global(B, [S, B], _is_semver, "is_semver_bool")],
        "major": [_member(N, [S], lambda v: _part(v, 0), "semver_major")],
        "minor": [_member(N, [S], lambda v: _part(v, 1), "semver_minor")],
        "patch": [_member(N, [S], lambda v: _part(v, 2), "semver_patch")],
    }
    return [cel.FunctionDecl(name, overloads) for name, overloads in table.items()]


def _is_integral(text: str) -> bool:
    value = _quantity(text)
    return value == value.to_integral_value() and abs(value) <= _MAX_INT
