"""Kubernetes quantities, fuzzed against the grammar apimachinery accepts: whatever the grammar
generates parses to the value it denotes (or is refused as out of range), and no text outside the
grammar parses at all."""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.quantity import MAX, QuantityError, parse_quantity

# apimachinery's ParseQuantity, as a language: an optionally signed number (digits, a point, digits:
# either side may be empty) and a suffix (binary SI, decimal SI with n and u, or an exponent).
ACCEPTED = re.compile(r"[+-]?[0-9]*(\.[0-9]*)?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?")
BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def denoted(text: str) -> Fraction:
    """The exact value of a text of the grammar (an independent reading of it)."""
    match = re.fullmatch(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", text)
    assert match is not None
    sign, whole, fraction, suffix = match.groups()
    value = Fraction(int(whole or "0")) + (Fraction(int(fraction), 10 ** len(fraction)) if fraction else 0)
    if suffix in BINARY:
        value *= 2 ** BINARY[suffix]
    elif suffix in DECIMAL:
        value *= Fraction(10) ** DECIMAL[suffix]
    else:
        value *= Fraction(10) ** int(suffix[1:])
    return -value if sign == "-" else value


def nano_round_up(value: Fraction) -> Fraction:
    """apimachinery rounds non-integers up, away from zero, to nano units."""
    if value.denominator == 1:
        return value
    magnitude = abs(value) * 10**9
    rounded = Fraction(-(-magnitude.numerator // magnitude.denominator), 10**9)
    return rounded if value > 0 else -rounded


digits = st.text("0123456789", max_size=6)
grammar = st.builds(
    lambda sign, whole, point, fraction, suffix: f"{sign}{whole}{point}{fraction if point else ''}{suffix}",
    st.sampled_from(["", "+", "-"]),
    digits,
    st.sampled_from(["", "."]),
    digits,
    st.one_of(
        st.sampled_from([*BINARY, *DECIMAL]),
        st.builds(
            lambda e, s, n: f"{e}{s}{n}", st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), st.integers(0, 40)
        ),
    ),
).filter(bool)  # apimachinery refuses the empty text before anything else


@settings(max_examples=2000, deadline=None)
@given(grammar)
def test_every_text_of_the_grammar_parses_to_what_it_denotes_or_is_out_of_range(text):
    value = denoted(text)
    if abs(value) > MAX:
        with pytest.raises(QuantityError):
            parse_quantity(text)
        return
    assert Fraction(parse_quantity(text)) == nano_round_up(value)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.text(max_size=12), st.text("0123456789.+-eEiKMGTPnumk _١", max_size=10)))
def test_no_text_outside_the_grammar_parses(text):
    try:
        parse_quantity(text)
    except QuantityError:
        return
    assert ACCEPTED.fullmatch(text) and text, repr(text)


@pytest.mark.parametrize(
    "text, value",
    [
        ("1", 1),
        ("100m", "0.1"),
        ("1.5Gi", 1610612736),
        ("1E", 10**18),
        ("1e3", 1000),
        (".5", "0.5"),
        ("1.", 1),
        ("+", 0),
        ("0.1n", "1e-9"),
        ("7Ei", 7 * 2**60),
        ("9223372036854775807", MAX),
    ],
)
def test_apimachinerys_corners_are_read_as_it_reads_them(text, value):
    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 1",
        "1 ",
        "١",
        "NaN",
        "Infinity",
        "1_0",
        "1e",
        "1kk",
        "1e3.5",
        "8Ei",
        "1e600000",
        "1e99999999999",
        "9223372036854775808",
    ],
)
def test_what_apimachinery_refuses_or_cannot_hold_is_refused(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("value, expected", [(1, 1), (2.5, "2.5"), (10**18, 10**18)])
def test_json_numbers_are_quantities_too(value, expected):
    assert parse_quantity(value) == Decimal(expected)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, None, [], 2**64])
def test_json_values_that_are_no_quantity_are_refused(value):
    with pytest.raises(QuantityError):
        parse_quantity(value)
