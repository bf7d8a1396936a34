"""Kubernetes quantities, parsed as apimachinery's `resource.ParseQuantity` parses them.

One parser for pods and policies. It follows apimachinery's own code (parseQuantityString and
the suffixer), not a regular expression of the documented grammar, so the corners agree too:
ASCII digits only (`"١"` is no number), no surrounding spaces (the API server's JSON decoder
trims them before parsing, and admission reviews carry quantities in canonical form), `"1."` and
`".5"` are numbers, `"1E"` is an exa, `"1e3"` an exponent, `"+"` alone is zero.

Bounded where apimachinery is not: it caps magnitudes at 2^63-1 after building the whole number,
so `"1e600000"` costs it (and kubernetes.utils.parse_quantity) seconds; here a value beyond
2^63-1 is refused from the digit count and the exponent alone, in constant time. Values are
rounded up to nano units, as apimachinery rounds them.
"""

from __future__ import annotations

import math
from decimal import ROUND_UP, Decimal, localcontext
from functools import lru_cache

MAX = 2**63 - 1  # apimachinery's largest magnitude
NANO = Decimal("1e-9")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_INT32 = 2**31


class QuantityError(ValueError):
    """Not a Kubernetes quantity (the message says why)."""


def _split(text: str) -> tuple[bool, str, str, str]:
    """(positive, integer digits, fraction digits, suffix), as apimachinery's parseQuantityString."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":  # leading zeros
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos] or "0"
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError("unexpected characters")
    return positive, whole, fraction, text[suffix_start:]


def _exponent(suffix: str) -> tuple[int, int]:
    """(base, exponent) of a suffix: Ki..Ei, n..E, or e/E followed by a signed integer."""
    if suffix in _BINARY:
        return 2, _BINARY[suffix]
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:].lstrip("+-")
        if suffix[1:].count("+") + suffix[1:].count("-") <= 1 and digits and set(digits) <= _DIGITS:
            # apimachinery reads it into an int64 and then an int32; anything past int32 is out of
            # any quantity's range (and apimachinery's wrap-around would be no answer anyway).
            if len(digits.lstrip("0")) <= 10 and int(digits) < _INT32:
                return 10, int(suffix[1:])
            raise QuantityError("exponent out of range")
    raise QuantityError(f"unknown suffix {suffix!r}")


def _parse(text: str) -> Decimal:
    if not text:
        raise QuantityError("empty")
    if text == "0":
        return Decimal(0)
    positive, whole, fraction, suffix = _split(text)
    base, exponent = _exponent(suffix)
    if whole == "0" and not fraction.strip("0"):
        return Decimal(0)
    # Magnitude bound before any arithmetic: 10^(digits-1) <= integer part < 10^digits.
    digits = len(whole.lstrip("0")) if whole != "0" else -len(fraction) + len(fraction.lstrip("0"))
    decimal_exponent = exponent if base == 10 else math.ceil(exponent * math.log10(2))
    if digits + decimal_exponent > 20:
        raise QuantityError("more than 2^63-1")
    kept = 10 + max(0, decimal_exponent)  # fraction digits that land above nano; later ones only round up
    if len(fraction) > kept:
        fraction = fraction[:kept] + ("1" if fraction[kept:].strip("0") else "")
    # Exact: an integer coefficient and a power of ten (Decimal's own operators round to 28 digits).
    coefficient = int(whole + fraction)
    if base == 10:
        value = Decimal(f"{coefficient}E{exponent - len(fraction)}")
    else:
        value = Decimal(f"{coefficient << exponent}E{-len(fraction)}")
    if value > MAX:
        raise QuantityError("more than 2^63-1")
    if value == value.to_integral_value():
        value = Decimal(int(value))
    elif value.adjusted() < -9:
        value = NANO
    else:
        with localcontext(prec=40):
            value = value.quantize(NANO, rounding=ROUND_UP).normalize()
    return value if positive else -value


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Decimal:
    return _parse(text)


def parse_quantity(raw: object) -> Decimal:
    """A quantity from a JSON or YAML value: a string in Kubernetes' notation, or a number.

    Pods repeat the same few texts ("1", "100m", "15Gi"): each is parsed once (the cache is keyed
    by the text, so it holds no more than it is told). QuantityError (a ValueError) otherwise.
    """
    if isinstance(raw, str):
        return _parse_text(raw) if len(raw) < 64 else _parse(raw)  # long texts: not worth keeping
    if isinstance(raw, bool):
        raise QuantityError("a boolean is not a quantity")
    if isinstance(raw, int):
        if abs(raw) > MAX:
            raise QuantityError("more than 2^63-1")
        return Decimal(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError("not a finite number")
        return _parse_text(repr(raw))  # the shortest text that reads back as this float
    raise QuantityError(f"a {type(raw).__name__} is not a quantity")
