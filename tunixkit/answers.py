"""Answer extraction and numeric checking for math completions: one policy, used everywhere.

Pure functions, no JAX. Used by the rewards, the evaluator, the agentic scorer and the data loaders.
The policy (``docs/answer_checking.md`` states it with its reasons and its known limits):

1. **Where the answer is.** Every closed ``<answer>...</answer>`` block; with ``strict=True`` only
   those. Otherwise, when there is none: an unclosed ``<answer>``, every ``\\boxed{...}``, the last
   "the answer is ...", the last ``#### ...`` (each up to the end of its sentence), and finally the
   last sentence of the text. The first of these that holds a number is the answer statement.
2. **Which number.** The statement is cut at its *conclusion markers* (``=``, ``≈``, ``=>``,
   ``→``, a ``:`` not between digits, and the words *so, thus, hence, therefore, i.e., which is,
   that is, making, giving, gives, equals, answer is*); the last piece that holds a number is the
   conclusion. ``from 10 to 16, so 16`` is 16; ``5 + 5 = 10`` is 10; ``12 apples`` is 12.
3. **Hedges.** If the conclusion names two or more *different* numbers, there is no answer: it is
   a hedge or a list (``7 or 8``, ``either 7 or 8``, ``between 7 and 8``, ``from 7 to 8``, ``7-8``,
   ``7–8``, ``7, 8``, ``7 and 8``, ``about 7 or 8``), whatever the words between them. The same
   number repeated (``7 or 7``, ``$7 (7 dollars)``) is one answer. Several ``<answer>`` blocks (or
   ``\\boxed{}``) that read different numbers are a hedge too. A hedge is a wrong answer: it is
   never correct and the rewards score it as a wrong number (:attr:`Extraction.hedge`).
4. **Reading a number.** A sign (``-``, ``+``, unicode ``−``), a currency (``$ € £``, before or
   after the sign: ``-$5`` and ``$-5``), digits with thousands commas (``1,234``; ``1,23`` is not a
   number but two) or single spaces (``12 000``), decimals (``.5``, ``3.50``), a fraction (``3/4``,
   ``\\frac{3}{4}``, ``½``), a mixed number (``3 1/2`` is 3.5; ``3-1/2`` is not: it reads as 3 and
   1/2, a hedge, since it may also mean 3 minus 1/2), scientific notation (``1.5e3``,
   ``1.5 × 10^3``, ``1.5*10^3``, ``10^{3}``) and a percent sign, which is dropped (``40%`` is 40,
   as GSM8K writes answers). Digits inside a word (``CO2``, ``mp3``) are not numbers.

>>> extract_answer("<reasoning>2+2</reasoning><answer>$1,234.50</answer>")
Extraction(value=1234.5, method='answer_tag', text='$1,234.50', hedge=())
>>> is_correct("<answer>-3/4</answer>", "-0.75")
True
>>> [is_correct("<answer>from 10 to 16, so 16</answer>", gold) for gold in (16, 10)]
[True, False]
>>> [is_correct("<answer>from 10 to 16</answer>", gold) for gold in (16, 10)]  # a range: a hedge
[False, False]
>>> extract_answer("<answer>7 or 8</answer>")
Extraction(value=None, method='answer_tag', text='7 or 8', hedge=(7.0, 8.0))
>>> cases = [("1.5e3", 1500), ("1.5 × 10^3", 1500), ("3 1/2", 3.5), ("7 or 7", 7)]
>>> [is_correct(f"<answer>{text}</answer>", gold) for text, gold in cases]
[True, True, True, True]

**MATH-style answers** (MATH, MATH-500: fractions, radicals, intervals, sets, text) are LaTeX, not
one number: :func:`latex_answer` finds the statement (the last ``<answer>`` block, its ``\\boxed{}``
if it has one; without a block, unless ``strict``, the ``\\boxed{}``), and
:func:`latex_correct` decides equivalence with math-verify (``math_verify.parse`` and ``verify``,
sympy underneath). A hedge is wrong here too: several blocks or boxes that differ, an "or"
between candidates, or different plain numbers with only words, spaces or ``- – — | ; ~`` between
them (``0 to 1``, ``between 0 and 1``, ``0-1``, ``0 | 1``): math-verify alone would read one of
them and could score it right. A comma list (``1, 2``: all the solutions) is a set, and an
expression (``3-\\sqrt{2}``) one answer: both are math-verify's to judge.
math-verify bounds its own time with signals, which work in the main thread only; tunix calls GRPO
rewards from a thread, where :func:`latex_correct_isolated` checks each answer in a worker process
it can end: an answer that takes longer than ``timeout`` seconds is wrong, and counted.
"""

from __future__ import annotations

import atexit
import dataclasses
import math
import os
import pickle
import re
import select
import subprocess
import sys
import threading
import time
import unicodedata
from fractions import Fraction
from typing import Any

__all__ = [
    "Extraction",
    "LatexAnswer",
    "extract_answer",
    "is_correct",
    "last_number",
    "latex_correct",
    "latex_correct_isolated",
    "numbers",
    "read_answer",
]

_SEP = " \u00a0\u2009\u202f"  # a thousands separator or the gap of a mixed number: one space
_GROUPS = rf"\d{{1,3}}(?:,\d{{3}}(?!\d))+|\d{{1,3}}(?:[{_SEP}]\d{{3}}(?!\d))+"
_EXP10 = r"10\s?(?:\^|\*\*)\s?\{?(?P<NAME>[-+]?\d+)\}?"
NUMBER_RE = re.compile(
    r"(?<![\w.])(?P<sign>[-+])?(?:[$€£]\s?)?(?P<sign2>[-+])?(?:"
    rf"(?P<whole>\d+)[{_SEP}](?P<num>\d+)\s?/\s?(?P<den>\d+)(?![\d.])"  # mixed number: 3 1/2
    rf"|{_EXP10.replace('NAME', 'pow')}"  # a bare power of ten: 10^3
    rf"|(?P<mant>(?:{_GROUPS}|\d+)(?:\.\d+)?|\.\d+)"
    r"(?:[eE](?P<exp>[-+]?\d+)"  # 1.5e3
    rf"|\s?[×x*·]\s?{_EXP10.replace('NAME', 'exp10')}"  # 1.5 × 10^3
    r"|\s?/\s?(?P<over>\d+(?:\.\d+)?))?"  # a fraction: 3/4
    r")(?:\s?%)?"
)
"""A number, in any of the writings the policy reads (the module docstring, point 4)."""
CONCLUSION_RE = re.compile(
    r"=>|⇒|→|->|(?<![<>!=])=+|≈|≅|(?<!\d):|:(?!\d)"
    r"|(?<!\w)(?:so|thus|hence|therefore|i\.e\.|which is|that is|that's|making|giving|gives|equals"
    r"|answer is)(?!\w)",
    re.I,
)
"""What ends a premise and starts a conclusion: the answer is in the last piece with a number."""
ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
OPEN_ANSWER_RE = re.compile(r"<answer>(.*)$", re.S | re.I)
BOXED_RE = re.compile(r"\\boxed\s*\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}")
THE_ANSWER_RE = re.compile(r"answer\s+is\s*:?\s*(?=([^\n]*))", re.I)
HASH_RE = re.compile(r"####\s*(?=([^\n]*))")
_SENTENCE_END_RE = re.compile(r"[.!?](?=\s|$)|\n")
_LATEX_FRAC_RE = re.compile(r"(\d?)\s*\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_LATEX = [
    (re.compile(pattern), repl)
    for pattern, repl in [
        (r"\\text\{([^{}]*)\}", r" \1 "),
        (r"\\(?:times|cdot)", "×"),
        (r"\\approx", "≈"),
        (r"\\(?:Rightarrow|implies)", "⇒"),
        (r"\\([$%])", r"\1"),
        (r"\{,\}", ","),
        (r"\\[,!;: ]", ""),
        (r"\\boxed\s*", ""),
        (r"\\[a-zA-Z]+", " "),
    ]
]
_POWER_RE = re.compile(r"10([⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)")
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_VULGAR = {
    c: str(Fraction(unicodedata.numeric(c)).limit_denominator(10))
    for c in "½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞"  # halves to eighths (no sevenths)
}
_VULGAR_RE = re.compile(r"(\d?)([" + "".join(_VULGAR) + "])")


@dataclasses.dataclass(frozen=True)
class Extraction:
    """A parsed answer: its value (``None`` if no single number), how it was found, the text.

    ``hedge`` holds the different numbers of a hedged answer (``7 or 8``): then ``value`` is
    ``None`` and the answer counts as a wrong number, not as a missing one.
    """

    value: float | None
    method: str
    text: str
    hedge: tuple[float, ...] = ()


def _frac(m: re.Match[str]) -> str:
    """``\\frac{a}{b}`` as ``a/b`` (``(a)/(b)`` unless plain); ``3\\frac{1}{2}`` is 3 1/2."""
    a, b = m[2].strip(), m[3].strip()
    plain = all(re.fullmatch(r"[-+]?\d+(?:\.\d+)?", x) for x in (a, b))
    return m[1] + (" " if m[1] else "") + (f"{a}/{b}" if plain else f"({a})/({b})")


def _normalize(text: str) -> str:
    """LaTeX, unicode minus, superscript powers of ten and vulgar fractions in plain writing."""
    text = _LATEX_FRAC_RE.sub(_frac, text.replace("−", "-"))
    for regex, repl in _LATEX:
        text = regex.sub(repl, text)
    text = _POWER_RE.sub(lambda m: "10^" + m[1].translate(_SUPERSCRIPT), text)
    return _VULGAR_RE.sub(lambda m: (m[1] + " " if m[1] else "") + _VULGAR[m[2]], text)


def _power_of_ten(exponent: str) -> Fraction:
    """``10 ** exponent``; beyond what a float holds it is not read (``OverflowError``)."""
    if len(exponent) > 5 or abs(int(exponent)) > 400:
        raise OverflowError(exponent)
    return Fraction(10) ** int(exponent)


def _value(m: re.Match[str]) -> float | None:
    """The value of one :data:`NUMBER_RE` match; ``None`` when it is not a number (``1/0``)."""
    negative = "-" in (m["sign"] or "", m["sign2"] or "")
    try:
        if m["whole"] is not None:
            value = Fraction(m["whole"]) + Fraction(int(m["num"]), int(m["den"]))
        elif m["pow"] is not None:
            value = _power_of_ten(m["pow"])
        else:
            value = Fraction(re.sub(f"[,{_SEP}]", "", m["mant"]))
            if m["exp"] is not None or m["exp10"] is not None:
                value *= _power_of_ten(m["exp"] or m["exp10"])
            elif m["over"] is not None:
                value /= Fraction(m["over"])
        return float(-value if negative else value)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


def _proper(num: str, den: str) -> bool:
    """Whether ``num/den`` (digit strings of any length) is a proper fraction, as a mixed number
    writes it: ``12 000/2`` is no mixed number."""
    den = den.lstrip("0") or "0"
    return not num.startswith("0") and (len(num), num) < (len(den), den)


def _matches(text: str) -> list[re.Match[str]]:
    """The numbers of ``text`` in order; an improper "mixed number" (``5 4/2``) is two numbers."""
    out, pos = [], 0
    while (m := NUMBER_RE.search(text, pos)) is not None:
        if m["whole"] is not None and not _proper(m["num"], m["den"]):
            m = NUMBER_RE.match(text[: m.start("whole") + len(m["whole"]) + 1], m.start())
        out.append(m)
        pos = m.end()
    return out


def numbers(text: str) -> list[float | None]:
    """Every number in ``text``, in order, as the policy reads them (``None``: not a number).

    >>> numbers("3 1/2, 1.5e3, 1.5 × 10^3, $-5, -$5.50, 12 000, 1,23, 40%, CO2, ¾, 1/0")
    [3.5, 1500.0, 1500.0, -5.0, -5.5, 12000.0, 1.0, 23.0, 40.0, 0.75, None]
    >>> numbers(r"\\frac{3}{4}, 2\\frac{1}{2}, 1.5 \\times 10^{3}, 1.5×10³, 10^6")
    [0.75, 2.5, 1500.0, 1500.0, 1000000.0]
    """
    return [_value(m) for m in _matches(_normalize(text or ""))]


def parse_number(text: str) -> float | None:
    """The first number in ``text`` (a gold answer, a tool's result), read as the policy reads it.

    Percent signs are dropped (``40%`` is 40, as GSM8K writes answers), fractions are divided.

    >>> [parse_number(s) for s in ["1,234", "$5.50", "40%", "-3/4", "−7", "1/0", "abc"]]
    [1234.0, 5.5, 40.0, -0.75, -7.0, None, None]
    >>> parse_number(r"\\frac{1}{2}"), parse_number("1.5e3"), parse_number("3 1/2")
    (0.5, 1500.0, 3.5)
    """
    found = numbers(text) if isinstance(text, str) else []
    return found[0] if found else None


def last_number(text: str) -> float | None:
    """The value of the last number in ``text``: a raw reading, not the answer policy (that is
    :func:`extract_answer`, which also refuses hedges).

    >>> last_number("3 apples, then 12 more: 15")
    15.0
    """
    found = [v for v in numbers(text) if v is not None]
    return found[-1] if found else None


def read_answer(statement: str, method: str = "text") -> Extraction:
    """Read one answer statement: the number of its conclusion, or a hedge (module docstring, 2-3).

    >>> [read_answer(s).value for s in ["from 10 to 16, so 16", "5 + 5 = 10", "12 apples", "7, 7"]]
    [16.0, 10.0, 12.0, 7.0]
    >>> [read_answer(s).hedge for s in ["7 or 8", "between 7 and 8", "7-8", "about 7 or 8", "7/8"]]
    [(7.0, 8.0), (7.0, 8.0), (7.0, 8.0), (7.0, 8.0), ()]
    """
    text = _normalize(statement or "")
    pieces = CONCLUSION_RE.split(text)
    found: list[float | None] = []
    for piece in reversed(pieces):
        found = [_value(m) for m in _matches(piece)]
        if found:
            break
    distinct: list[float | None] = []
    for v in found:
        if not any(_same(v, d) for d in distinct):
            distinct.append(v)
    clean = (statement or "").strip()
    if len(distinct) > 1:
        return Extraction(None, method, clean, tuple(v for v in distinct if v is not None))
    return Extraction(distinct[0] if distinct else None, method, clean)


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or numbers_equal(a, b)


def _agree(readings: list[Extraction], method: str, text: str) -> Extraction:
    """One reading from several blocks: those with a number must agree, else it is a hedge."""
    with_number = [r for r in readings if r.value is not None or r.hedge]
    if not with_number:
        return Extraction(None, method, text)
    values: list[float] = []
    for r in with_number:
        for v in (r.value,) if r.value is not None else r.hedge:
            if not any(numbers_equal(v, w) for w in values):
                values.append(v)
    if len(values) == 1 and all(r.value is not None for r in with_number):
        return Extraction(values[0], method, text)
    return Extraction(None, method, text, tuple(values))


def _sentence(text: str) -> str:
    """``text`` up to the end of its first sentence."""
    return _SENTENCE_END_RE.split(text, 1)[0]


def extract_answer(completion: str, *, strict: bool = False) -> Extraction:
    """Find the final answer in a completion (the policy: module docstring).

    With ``strict=True`` only closed ``<answer>...</answer>`` blocks count (the reward and the
    hackathon format); otherwise the fallbacks of the module docstring apply, in order.

    >>> extract_answer("so the answer is 42.").method
    'the_answer_is'
    >>> extract_answer("The total is 7 + 8 = 15", strict=True).value is None
    True
    >>> extract_answer("<answer>7 + 8 = 15</answer>").value
    15.0
    >>> extract_answer("<answer>5</answer><answer>4</answer>").hedge  # two blocks, two answers
    (5.0, 4.0)
    """
    completion = completion or ""
    tags = ANSWER_TAG_RE.findall(completion)
    if tags:
        return _agree([read_answer(t, "answer_tag") for t in tags], "answer_tag", tags[-1].strip())
    if strict:
        return Extraction(None, "none", "")
    opened = OPEN_ANSWER_RE.search(completion)
    boxes = BOXED_RE.findall(completion)
    the_answer_is, hashes = THE_ANSWER_RE.findall(completion), HASH_RE.findall(completion)
    sentences = [s for s in _SENTENCE_END_RE.split(completion) if numbers(s)]
    candidates = (
        lambda: read_answer(opened.group(1), "open_answer_tag") if opened else None,
        lambda: (
            _agree([read_answer(b) for b in boxes], "boxed", boxes[-1].strip()) if boxes else None
        ),
        lambda: (
            read_answer(_sentence(the_answer_is[-1]), "the_answer_is") if the_answer_is else None
        ),
        lambda: read_answer(_sentence(hashes[-1]), "hashes") if hashes else None,
        lambda: read_answer(sentences[-1], "last_number") if sentences else None,
    )
    for candidate in candidates:
        ex = candidate()
        if ex is not None and (ex.value is not None or ex.hedge):
            return ex
    return Extraction(None, "none", "")


def numbers_equal(
    a: float | None, b: float | None, *, rel_tol: float = 1e-6, abs_tol: float = 1e-6
) -> bool:
    """Numeric equivalence with a tolerance; ``None`` equals nothing.

    >>> numbers_equal(0.1 + 0.2, 0.3), numbers_equal(None, 1.0), numbers_equal(18, 18.0)
    (True, False, True)
    """
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return False
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)


def is_correct(completion: str, gold: str | float, *, strict: bool = False) -> bool:
    """Whether the completion's final answer equals ``gold`` numerically (a hedge never does).

    >>> is_correct("<answer>1,000</answer>", "1000"), is_correct("<answer>99</answer>", 100)
    (True, False)
    >>> is_correct("<answer>7 or 8</answer>", 7), is_correct("<answer>7 or 8</answer>", 8)
    (False, False)
    """
    gold_value = gold if isinstance(gold, (int, float)) else parse_number(str(gold))
    return numbers_equal(extract_answer(completion, strict=strict).value, gold_value)


def format_number(value: float) -> str:
    """Canonical text for a numeric answer: integers without ``.0``.

    >>> format_number(18.0), format_number(-2.5), format_number(1e6)
    ('18', '-2.5', '1000000')
    """
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.6g}"


# MATH-style (LaTeX) answers, checked by math-verify

_TEXT_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{[^{}]*\}")
_OR_RE = re.compile(r"(?<![\\a-zA-Z])or(?![a-zA-Z])", re.I)
_COMMAND_RE = re.compile(
    r"\\(?!(?:text|textbf|mathrm|mbox|[dt]?frac|times|cdot|q?quad)\b)[a-zA-Z]+"
)
_LISTING_RE = re.compile(r"(?:[\s\-–—|;~]|[a-zA-Z]{2,})*")  # what may stand between listed numbers
LATEX_MAX_CHARS = 400  # a longer statement is not read (math-verify runs sympy on what it parses)


def last_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` (or ``\fbox{}``) in ``text``, braces balanced at
    any depth; None when there is none.

    >>> last_boxed(r"so \boxed{\left(\frac{1}{2},\frac{\sqrt{3}}{2}\right)}.")
    '\\left(\\frac{1}{2},\\frac{\\sqrt{3}}{2}\\right)'
    >>> last_boxed("no box"), last_boxed(r"\boxed{unclosed")
    (None, None)
    """
    found = _boxes(text)
    return found[-1] if found else None


def _boxes(text: str) -> list[str]:
    out = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text or ""):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.end() : i - 1].strip())
    return out


@dataclasses.dataclass(frozen=True)
class LatexAnswer:
    """A MATH-style answer: its LaTeX ``text`` (None when there is no single one), how it was
    found, and the different candidates of a hedge."""

    text: str | None
    method: str
    hedge: tuple[str, ...] = ()


def _listed_numbers(text: str) -> tuple[str, ...]:
    r"""The different plain numbers of ``text`` when nothing mathematical stands between them:
    only words, spaces and ``- – — | ; ~`` (``0 to 1``, ``between 0 and 1``, ``0-1``, ``0 | 1``:
    a range or a list, which math-verify would read as one of its numbers); else ``()``. A comma
    list (``1, 2``: all the solutions) and any expression (``3-\sqrt{2}``, ``2^3``, ``1-2i``) are
    left to math-verify.

    >>> _listed_numbers("0 to 1"), _listed_numbers(r"1 \text{ and } 2"), _listed_numbers("7 - 7")
    (('0', '1'), ('1', '2'), ())
    >>> [_listed_numbers(t) for t in ("1, 2", r"3-\sqrt{2}", r"2\pi - 3", "1-2i", "2^3-1")]
    [(), (), (), (), ()]
    """
    if _COMMAND_RE.search(text):  # \pi, \sqrt, \infty...: an expression
        return ()
    plain = _normalize(text)
    found = _matches(plain)
    values = [_value(m) for m in found]
    if any(v is None for v in values) or all(numbers_equal(v, values[0]) for v in values):
        return ()
    rest, pos = [], 0
    for m in found:
        rest.append(plain[pos : m.start()])
        pos = m.end()
    if not _LISTING_RE.fullmatch("".join([*rest, plain[pos:]])):
        return ()
    return tuple(m[0].strip() for m in found)


def _statement(statement: str, method: str) -> LatexAnswer:
    boxes = _boxes(statement)
    if len({b.replace(" ", "") for b in boxes}) > 1:
        return LatexAnswer(None, method, tuple(boxes))
    text = (boxes[0] if boxes else statement).strip().strip("$").strip().rstrip(".").strip()
    if _OR_RE.search(_TEXT_RE.sub("", text)):
        return LatexAnswer(None, method, tuple(p.strip() for p in _OR_RE.split(text)))
    if listed := _listed_numbers(text):
        return LatexAnswer(None, method, listed)
    if not text or len(text) > LATEX_MAX_CHARS:
        return LatexAnswer(None, "none" if not text else "too_long")
    return LatexAnswer(text, method)


def latex_answer(completion: str, *, strict: bool = False) -> LatexAnswer:
    r"""The final LaTeX answer of a completion to a MATH-style problem (the policy: module
    docstring).

    >>> latex_answer(r"<reasoning>r</reasoning><answer>\boxed{\frac{1}{2}}</answer>")
    LatexAnswer(text='\\frac{1}{2}', method='answer_tag', hedge=())
    >>> latex_answer(r"<answer>3 or 4</answer>").hedge, latex_answer(r"so \boxed{5}.").text
    (('3', '4'), '5')
    >>> latex_answer(r"<answer>1</answer><answer>2</answer>").hedge
    ('1', '2')
    >>> latex_answer(r"so \boxed{5}.", strict=True).text is None
    True
    """
    completion = completion or ""
    tags = [t.strip() for t in ANSWER_TAG_RE.findall(completion)]
    if len({t.replace(" ", "") for t in tags}) > 1:
        return LatexAnswer(None, "answer_tag", tuple(tags))
    if tags:
        return _statement(tags[-1], "answer_tag")
    if strict:
        return LatexAnswer(None, "none")
    boxes = _boxes(completion)
    if len({b.replace(" ", "") for b in boxes}) > 1:  # boxes that differ: a hedge
        return LatexAnswer(None, "boxed", tuple(boxes))
    return _statement(boxes[-1], "boxed") if boxes else LatexAnswer(None, "none")


def _parse(latex: str) -> list[Any]:
    """math-verify's reading of one LaTeX answer (its timeouts use signals: main thread only)."""
    from math_verify import parse  # sympy under it: imported when a LaTeX answer is first read

    main = threading.current_thread() is threading.main_thread()
    return parse("\\boxed{" + latex + "}", parsing_timeout=5 if main else None)


def latex_correct(completion: str, gold: str, *, strict: bool = False) -> bool:
    r"""Whether the completion's final answer (:func:`latex_answer`) equals the LaTeX ``gold``
    answer, as math-verify decides (a hedge never does).

    >>> [latex_correct(f"<answer>{a}</answer>", g) for a, g in [
    ...     ("0.5", r"\frac{1}{2}"), (r"\sqrt{12}", r"2\sqrt{3}"), ("(1,2)", "(1,2]"),
    ...     (r"\{2,1\}", r"\{1,2\}"), (r"\text{Monday}", r"\text{Monday}"), ("3 or 4", "4")]]
    [True, True, False, True, True, False]
    """
    from math_verify import verify

    found = latex_answer(completion, strict=strict)
    if found.text is None:
        return False
    gold_parsed, found_parsed = _parse(str(gold)), _parse(found.text)
    if not gold_parsed or not found_parsed:
        return False
    main = threading.current_thread() is threading.main_thread()
    return bool(verify(gold_parsed, found_parsed, timeout_seconds=5 if main else None))


_WORKER: Any = None  # the worker process of run_isolated (a subprocess.Popen), started on first use
_WORKER_LOCK = threading.Lock()
TIMED_OUT: list[str] = []  # the answers latex_correct_isolated gave up on (their first 80 chars)


def _worker() -> Any:
    """A fresh Python that runs :func:`_serve`: not a ``multiprocessing`` child, whose start
    re-runs the ``__main__`` script (a notebook run as a script would run again in it), and no
    fork under JAX's threads. It sees this process's ``sys.path``."""
    global _WORKER
    if _WORKER is None or _WORKER.poll() is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        _WORKER = subprocess.Popen(
            [sys.executable, "-c", "from tunixkit.answers import _serve; _serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        atexit.register(_stop_worker)
        _send(_WORKER.stdin, (_ready, ()))  # its start is not an item's time: waited for here
        _read(_WORKER.stdout.fileno(), 8 + len(pickle.dumps((True, True))), None)
    return _WORKER


def _ready() -> bool:
    import math_verify  # noqa: F401  (sympy: seconds to import, once)

    return True


def _stop_worker() -> None:
    global _WORKER
    if _WORKER is not None:
        _WORKER.kill()
        _WORKER.wait()
        _WORKER = None


def _send(stream: Any, obj: Any) -> None:
    blob = pickle.dumps(obj)
    stream.write(len(blob).to_bytes(8, "little") + blob)
    stream.flush()


def _read(fd: int, n: int, deadline: float | None) -> bytes:
    """``n`` bytes from ``fd`` by ``deadline`` (``time.monotonic()``); TimeoutError after it,
    EOFError if the worker ended."""
    out = b""
    while len(out) < n:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not select.select([fd], [], [], wait)[0]:
            raise TimeoutError
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise EOFError("the worker process ended")
        out += chunk
    return out


def _serve() -> None:
    """The worker's loop: read ``(fn, args)``, answer ``fn(*args)`` (or the exception), until
    its input closes. What the work prints goes to stderr: stdout carries the answers."""
    answers_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    while True:
        try:
            size = int.from_bytes(_read(0, 8, None), "little")
        except EOFError:
            return
        fn, args = pickle.loads(_read(0, size, None))
        try:
            result: Any = (True, fn(*args))
        except Exception as exc:  # sent back, raised in the caller
            result = (False, exc)
        _send(answers_out, result)


def run_isolated(fn: Any, items: list[tuple[Any, ...]], *, timeout: float) -> list[Any]:
    """``fn(*item)`` for each item in a worker process (``fn`` importable by name), each given
    ``timeout`` seconds: an item that takes longer gives None and the worker is replaced (its
    work cannot be interrupted in place). An exception in ``fn`` is raised here."""
    out = []
    with _WORKER_LOCK:
        for item in items:
            worker = _worker()
            _send(worker.stdin, (fn, item))
            deadline = time.monotonic() + timeout
            try:
                size = int.from_bytes(_read(worker.stdout.fileno(), 8, deadline), "little")
                ok, result = pickle.loads(_read(worker.stdout.fileno(), size, deadline))
            except (TimeoutError, EOFError):  # too slow, or it ended (memory): replaced
                _stop_worker()
                out.append(None)
                continue
            if not ok:
                raise result
            out.append(result)
    return out


def latex_correct_isolated(
    completions: list[str], golds: list[str], *, strict: bool = True, timeout: float = 10.0
) -> list[bool]:
    """:func:`latex_correct` of each (completion, gold) pair, safe outside the main thread: there
    each pair is checked in a worker process given ``timeout`` seconds (math-verify's own limits
    use signals, main thread only), and a pair that takes longer is wrong (its completion goes to
    :data:`TIMED_OUT`). In the main thread, :func:`latex_correct` itself (its own limits)."""
    pairs = list(zip(completions, golds, strict=True))
    if threading.current_thread() is threading.main_thread():
        return [latex_correct(c, g, strict=strict) for c, g in pairs]
    items = [(c or "", str(g), strict) for c, g in pairs]
    results = run_isolated(_latex_correct_item, items, timeout=timeout)
    TIMED_OUT.extend(c[:80] for (c, _, _), r in zip(items, results, strict=True) if r is None)
    return [bool(r) for r in results]


def _latex_correct_item(completion: str, gold: str, strict: bool) -> bool:
    return latex_correct(completion, gold, strict=strict)
