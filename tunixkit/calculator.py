"""A safe arithmetic calculator for tool-use training: any string in, a short string out.

The model under training may send anything to the tool, so :func:`calculate` never raises, never
hangs and never runs code. It parses the text with ``ast.parse(mode="eval")``, accepts only
numbers, ``+ - * / // % **``, unary ``+``/``-`` and parentheses, and evaluates the tree itself
with exact rational arithmetic (:class:`fractions.Fraction`); ``eval``/``exec`` are never used.

Bounds keep every call cheap (microseconds to a few milliseconds):

- at most :data:`MAX_CHARS` characters, only the characters in :data:`ALLOWED_CHARS`
  (so no names, no ``inf``/``nan``, no exponent notation, no non-ASCII);
- parentheses nested at most :data:`MAX_PAREN_DEPTH` deep, the syntax tree at most
  :data:`MAX_TREE_DEPTH` deep;
- number literals of at most :data:`MAX_LITERAL_DIGITS` digits;
- integer exponents with ``|exponent| <= MAX_EXPONENT``, checked *before* the power is taken;
- every intermediate result within ``MAX_MAGNITUDE`` in absolute value, with a numerator and a
  denominator of at most :data:`MAX_BITS` bits each.

``/`` is exact division, ``//`` floors and ``%`` takes the sign of the divisor, as in Python.
Integer results print as integers; others as decimals with up to 12 significant digits.

>>> calculate("3 * (4 + 5)")
'27'
>>> calculate("7 / 2"), calculate("7 // 2"), calculate("-7 % 3"), calculate("2 ** -2")
('3.5', '3', '2', '0.25')
>>> calculate("1 / 3")
'0.333333333333'
>>> calculate("0.1 + 0.2")
'0.3'
>>> calculate("1 / 0")
'error: division by zero'
>>> calculate("9 ** 9 ** 9")
'error: exponent 387420489 is too large (limit 64)'
>>> calculate("__import__('os')")
"error: unsupported character '_'"
>>> calculate("")
'error: empty expression'
"""

from __future__ import annotations

import ast
import json
import math
from fractions import Fraction
from typing import Final

__all__ = ["CalculatorError", "calculate", "evaluate", "tool_call"]

MAX_CHARS: Final = 256
MAX_PAREN_DEPTH: Final = 16
MAX_TREE_DEPTH: Final = 64
MAX_LITERAL_DIGITS: Final = 30
MAX_EXPONENT: Final = 64
MAX_BITS: Final = 160  # numerator and denominator bits (2**160 ~ 1.5e48)
MAX_MAGNITUDE: Final = Fraction(10**40)
ALLOWED_CHARS: Final = frozenset("0123456789+-*/%(). \t\n")
ERROR_PREFIX: Final = "error: "
# How the model calls the tool and reads its result: tunix's Qwen tool parser (the only working one
# in 0.1.7) reads the JSON between these tags; tunix's ToolAgent shows the output after
# RESULT_PREFIX.
TOOL_CALL_START, TOOL_CALL_END = "<tool_call>", "</tool_call>"
RESULT_PREFIX: Final = "Tool returned result: "
SIGNIFICANT_DIGITS: Final = 12


class CalculatorError(ValueError):
    """An expression the calculator refuses or cannot evaluate (the message is for the model)."""


def _check_value(value: Fraction) -> Fraction:
    if abs(value) > MAX_MAGNITUDE:
        raise CalculatorError("result too large (limit 1e40)")
    if value.numerator.bit_length() > MAX_BITS or value.denominator.bit_length() > MAX_BITS:
        raise CalculatorError("result too precise")
    return value


def _literal(node: ast.Constant, source: str) -> Fraction:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculatorError("only numbers are allowed")
    # The literal's own text is exact ("0.1" is one tenth, not the nearest binary float).
    text = ast.get_source_segment(source, node) or repr(value)
    if sum(ch.isdigit() for ch in text) > MAX_LITERAL_DIGITS:
        raise CalculatorError(f"number too long (limit {MAX_LITERAL_DIGITS} digits)")
    if isinstance(value, float) and not math.isfinite(value):  # unreachable with ALLOWED_CHARS
        raise CalculatorError("number out of range")
    return _check_value(Fraction(text) if isinstance(value, float) else Fraction(value))


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise CalculatorError("only whole-number exponents are supported")
    e = exponent.numerator
    if abs(e) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {e} is too large (limit {MAX_EXPONENT})")
    if base == 0 and e < 0:
        raise CalculatorError("division by zero")
    # Size check before computing: the result's numerator/denominator have about |e| times the bits.
    bits = max(base.numerator.bit_length(), base.denominator.bit_length())
    if bits > 1 and abs(e) * (bits - 1) > MAX_BITS:
        raise CalculatorError("result too large (limit 1e40)")
    return base**e


def _binary(op: ast.operator, left: Fraction, right: Fraction) -> Fraction:
    if isinstance(op, ast.Add):
        return left + right
    if isinstance(op, ast.Sub):
        return left - right
    if isinstance(op, ast.Mult):
        return left * right
    if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
        raise CalculatorError("division by zero")
    if isinstance(op, ast.Div):
        return left / right
    if isinstance(op, ast.FloorDiv):
        return Fraction(left // right)
    if isinstance(op, ast.Mod):
        return left % right
    if isinstance(op, ast.Pow):
        return _power(left, right)
    raise CalculatorError(f"unsupported operator {type(op).__name__}")


def _eval(node: ast.AST, source: str) -> Fraction:
    if isinstance(node, ast.Constant):
        return _literal(node, source)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, source)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, source), _eval(node.right, source)
        return _check_value(_binary(node.op, left, right))
    raise CalculatorError(f"unsupported syntax ({type(node).__name__})")


def _tree_depth(root: ast.AST) -> int:
    """Depth of the syntax tree, computed iteratively (no recursion on untrusted input)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def evaluate(expression: str) -> Fraction:
    """The exact value of ``expression``; raises :class:`CalculatorError` (only) if refused.

    >>> evaluate("(1 + 2) * 3 / 4")
    Fraction(9, 4)
    >>> evaluate("10 ** 30 * 10 ** 20")
    Traceback (most recent call last):
    ...
    tunixkit.calculator.CalculatorError: result too large (limit 1e40)
    """
    if not isinstance(expression, str):
        raise CalculatorError("expression must be a string")
    text = expression.strip()
    if not text:
        raise CalculatorError("empty expression")
    if len(text) > MAX_CHARS:
        raise CalculatorError(f"expression too long (limit {MAX_CHARS} characters)")
    for ch in text:
        if ch not in ALLOWED_CHARS:
            shown = ch if ch.isprintable() and ch.isascii() else f"U+{ord(ch):04X}"
            raise CalculatorError(f"unsupported character {shown!r}")
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth > MAX_PAREN_DEPTH:
            raise CalculatorError(f"too deeply nested (limit {MAX_PAREN_DEPTH})")
        if depth < 0:
            raise CalculatorError("unbalanced parentheses")
    if depth:
        raise CalculatorError("unbalanced parentheses")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CalculatorError("invalid expression") from None
    if _tree_depth(tree) > MAX_TREE_DEPTH:
        raise CalculatorError(f"too deeply nested (limit {MAX_TREE_DEPTH})")
    try:
        return _eval(tree.body, text)
    except (ZeroDivisionError, OverflowError, RecursionError, MemoryError):
        raise CalculatorError("invalid expression") from None


def format_number(value: Fraction) -> str:
    """Integers exactly; other values as decimals with up to 12 significant digits.

    >>> format_number(Fraction(-10)), format_number(Fraction(1, 8)), format_number(Fraction(2, 3))
    ('-10', '0.125', '0.666666666667')
    >>> format_number(Fraction(1, 10**20))
    '1e-20'
    """
    if value.denominator == 1:
        return str(value.numerator)
    return format(float(value), f".{SIGNIFICANT_DIGITS}g")


def calculate(expression: object) -> str:
    """Evaluate ``expression``: the result as a string, or ``"error: <reason>"``. Never raises.

    >>> calculate("((2))*-3")
    '-6'
    >>> calculate("2 ^ 3")
    "error: unsupported character '^'"
    >>> calculate("(" * 50 + "1" + ")" * 50)
    'error: too deeply nested (limit 16)'
    """
    try:
        return format_number(evaluate(expression))  # type: ignore[arg-type]
    except CalculatorError as exc:
        return f"{ERROR_PREFIX}{exc}"
    except Exception:  # noqa: BLE001 - a tool must answer, whatever the input
        return f"{ERROR_PREFIX}invalid expression"


def tool_call(expression: str) -> str:
    """The text of a calculator call, as the model writes it.

    >>> tool_call("3 * 4")
    '<tool_call>{"name": "calculator", "arguments": {"expression": "3 * 4"}}</tool_call>'
    """
    call = {"name": "calculator", "arguments": {"expression": expression}}
    return f"{TOOL_CALL_START}{json.dumps(call)}{TOOL_CALL_END}"


def is_error(result: str) -> bool:
    """Whether a :func:`calculate` result is an error message.

    >>> is_error(calculate("1/0")), is_error(calculate("1/4"))
    (True, False)
    """
    return result.startswith(ERROR_PREFIX)
