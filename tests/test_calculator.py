"""Property tests for :mod:`tunixkit.calculator`: any input yields a string quickly; well-formed
expressions agree with an independent exact (Fraction/int) reference computation."""

from __future__ import annotations

import dataclasses
import sys
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tunixkit import calculator
from tunixkit.calculator import calculate, is_error

# Work, counted, not timed: the Python and C calls one calculation makes, at most linear in the
# input's length (real inputs make up to ~115 per character; a hang or an exponential blow-up makes
# far more, and a count does not depend on how busy the machine is). The largest count per
# character seen is recorded in MOST_CALLS and printed by test_calls_are_bounded.
CALLS_PER_CHAR, BASE_CALLS = 300, 2_000
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MOST_CALLS = [0.0, ""]


def timed(expression: object) -> str:
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        result = calculate(expression)
    finally:
        sys.setprofile(None)
    assert isinstance(result, str)
    size = len(str(expression))
    assert calls < BASE_CALLS + CALLS_PER_CHAR * size, f"{expression!r} made {calls} calls"
    if calls / (size + 1) > MOST_CALLS[0]:
        MOST_CALLS[:] = [calls / (size + 1), repr(expression)[:60]]
    return result


# ----------------------------------------------------------------------------------------------
# Arbitrary input: always a short string, never an exception, never slow.


@SETTINGS
@given(st.text(max_size=400))
def test_any_text(text: str) -> None:
    result = timed(text)
    assert len(result) < 120


@SETTINGS
@given(st.text(alphabet=sorted(calculator.ALLOWED_CHARS) + list("eE_^,xj"), max_size=300))
def test_calculator_alphabet(text: str) -> None:
    timed(text)


@SETTINGS
@given(st.one_of(st.none(), st.integers(), st.floats(), st.binary(), st.lists(st.text())))
def test_non_strings(value: object) -> None:
    assert is_error(timed(value))


@SETTINGS
@given(
    st.lists(
        st.sampled_from(
            ["9", "99", "**", "*", "//", "/", "%", "+", "-", "(", ")", "0", ".", "1", " ", "9" * 30]
        ),
        max_size=120,
    )
)
def test_token_soup(tokens: list[str]) -> None:
    timed("".join(tokens))


# ----------------------------------------------------------------------------------------------
# Deep, long and huge input finishes quickly (with an error).


@SETTINGS
@given(st.integers(0, 3000), st.sampled_from(["1", "9**9", "-1", "2*3"]))
def test_deep_parentheses(depth: int, core: str) -> None:
    result = timed("(" * depth + core + ")" * depth)
    if depth > calculator.MAX_PAREN_DEPTH:
        assert is_error(result)


@SETTINGS
@given(st.integers(1, 5000), st.sampled_from(["-", "+", "- ", "+-"]))
def test_long_unary_chains(n: int, op: str) -> None:
    timed(op * n + "7")


@SETTINGS
@given(st.integers(1, 3000), st.sampled_from(["+", "*", "**", "//", "%", "/"]))
def test_long_operator_chains(n: int, op: str) -> None:
    timed(op.join(["9"] * n))


@SETTINGS
@given(st.integers(31, 20000))
def test_huge_literals(digits: int) -> None:
    assert is_error(timed("7" * digits))
    assert is_error(timed("0." + "3" * digits))


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9",
        "9**9**9**9",
        "(9**64)**64",
        "((2**64)**64)**64",
        "2**64*2**64*2**64*2**64",
        "10**40*10",
        "(1/3)**64/3**64",
        "1/(2**64)/(2**64)/(2**64)",
        "-(10**30)**2",
        "(-2)**-64**2",
        "0**-1",
        "1%0",
        "1//0",
        "1/0",
        "1/(1-1)",
        "inf",
        "1e999",
        "float('nan')",
        "().__class__",
        "__import__('os').system('true')",
        "lambda: 1",
        "[1]*10**9",
        "'a'*10**9",
        "1 if 1 else 2",
        "1 < 2",
        "~1",
        "1 << 100000",
        "1,2",
        "١٢",  # Arabic-Indic digits
        "１２",  # fullwidth digits
        "2\u00d73",  # multiplication sign
        "\x00",
        "",
        "   ",
        "(",
        ")",
        "1 2",
        "9" * 256 + "+1",
    ],
)
def test_hostile_expressions_are_errors(expression: str) -> None:
    assert is_error(timed(expression)), expression


# ----------------------------------------------------------------------------------------------
# Well-formed expressions agree with an exact reference computation.


@dataclasses.dataclass(frozen=True)
class Expr:
    """An expression's text and its exact value, or None when the calculator must refuse it
    (division by zero, a non-integer or too large exponent, a result past the bounds)."""

    text: str
    value: Fraction | None


def _bounded(value: Fraction | None) -> Fraction | None:
    if value is None or abs(value) > calculator.MAX_MAGNITUDE:
        return None
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > calculator.MAX_BITS:
        return None
    return value


def _apply(op: str, a: Fraction | None, b: Fraction | None) -> Fraction | None:
    if a is None or b is None:
        return None
    if op == "+":
        return _bounded(a + b)
    if op == "-":
        return _bounded(a - b)
    if op == "*":
        return _bounded(a * b)
    if op in ("/", "//", "%") and b == 0:
        return None
    if op == "/":
        return _bounded(a / b)
    if op == "//":
        return _bounded(Fraction(a.numerator * b.denominator // (a.denominator * b.numerator)))
    if op == "%":
        return _bounded(a - b * (a.numerator * b.denominator // (a.denominator * b.numerator)))
    assert op == "**"
    if b.denominator != 1 or abs(b) > calculator.MAX_EXPONENT or (a == 0 and b < 0):
        return None
    e = b.numerator
    # Exact power by repeated multiplication (independent of Fraction.__pow__).
    result = Fraction(1)
    for _ in range(abs(e)):
        result *= a
        if abs(result.numerator).bit_length() > 20000:  # far past the bounds: stop early
            return None
    return _bounded(1 / result if e < 0 else result)


integers = st.integers(0, 10**6).map(lambda n: Expr(str(n), Fraction(n)))
decimals = st.tuples(st.integers(0, 9999), st.integers(0, 999)).map(
    lambda p: Expr(f"{p[0]}.{p[1]:03d}", Fraction(p[0]) + Fraction(p[1], 1000))
)
small_exponents = st.integers(-3, 5).map(lambda n: Expr(f"({n})", Fraction(n)))
leaves = st.one_of(integers, integers, decimals)


def _extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    binary = st.tuples(st.sampled_from(["+", "-", "*", "/", "//", "%"]), children, children).map(
        lambda t: Expr(f"({t[1].text} {t[0]} {t[2].text})", _apply(t[0], t[1].value, t[2].value))
    )
    power = st.tuples(children, st.one_of(small_exponents, children)).map(
        lambda t: Expr(f"({t[0].text} ** {t[1].text})", _apply("**", t[0].value, t[1].value))
    )
    negate = children.map(lambda c: Expr(f"(-{c.text})", None if c.value is None else -c.value))
    return st.one_of(binary, binary, power, negate)


expressions = st.recursive(leaves, _extend, max_leaves=10)


def _assert_matches(result: str, expected: Fraction) -> None:
    assert not is_error(result), result
    got = Fraction(result)
    if expected.denominator == 1:
        assert got == expected, (result, expected)
    else:
        assert abs(got - expected) <= abs(expected) * Fraction(1, 10**11), (result, expected)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_matches_reference(expr: Expr) -> None:
    assume(len(expr.text) <= calculator.MAX_CHARS)
    depth = max_depth = 0
    for ch in expr.text:
        depth += (ch == "(") - (ch == ")")
        max_depth = max(max_depth, depth)
    assume(max_depth <= calculator.MAX_PAREN_DEPTH)
    result = timed(expr.text)
    event("refused" if expr.value is None else "evaluated")
    if expr.value is None:
        assert is_error(result), (expr.text, result)
    else:
        _assert_matches(result, expr.value)


@SETTINGS
@given(
    st.lists(st.integers(0, 999), min_size=1, max_size=12),
    st.lists(st.sampled_from(["+", "-", "*"]), min_size=11, max_size=11),
)
def test_precedence_without_parentheses(numbers: list[int], ops: list[str]) -> None:
    text = str(numbers[0])
    # Reference: products bind tighter than sums (evaluated by hand, left to right).
    total, term, sign = 0, numbers[0], 1
    for n, op in zip(numbers[1:], ops, strict=False):
        text += f" {op} {n}"
        if op == "*":
            term *= n
        else:
            total += sign * term
            term, sign = n, (1 if op == "+" else -1)
    total += sign * term
    _assert_matches(timed(text), Fraction(total))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("-2 ** 2", "-4"),
        ("2 ** 3 ** 2", "512"),
        ("2 ** -1", "0.5"),
        ("(-2) ** 3", "-8"),
        ("-7 // 2", "-4"),
        ("-7 % 3", "2"),
        ("7 % -3", "-2"),
        ("7.5 // 2", "3"),
        ("1 - -1", "2"),
        ("+3", "3"),
        ("0.1 + 0.2", "0.3"),
        ("10 / 4", "2.5"),
        ("2 / 3", "0.666666666667"),
        ("1 / 3 * 3", "1"),
        ("10 ** 40", "1" + "0" * 40),
        ("-10 ** 40", "-1" + "0" * 40),
        ("2 ** 64", str(2**64)),
        (" ( 1 + 2 ) * 3 ", "9"),
        ("12 * 34\n", "408"),
    ],
)
def test_known_values(expression: str, expected: str) -> None:
    assert timed(expression) == expected


def test_calls_are_bounded() -> None:
    """The most work per character one input took (of those run so far), for the record."""
    timed("-" * 200 + "7")  # the longest unary chain the tests build
    print(f"most calls per character: {MOST_CALLS[0]:.0f} ({MOST_CALLS[1]})")
    assert 0 < MOST_CALLS[0] < CALLS_PER_CHAR
