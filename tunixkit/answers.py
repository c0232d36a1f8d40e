"""Answer extraction and numeric checking for math completions.

Pure functions, no JAX. Used by the rewards, the evaluator and the data loaders.

Extraction tries, in order: the last ``<answer>...</answer>`` block, the last ``\\boxed{...}``,
"The answer is ...", ``#### ...`` and finally the last number in the text. Numbers may carry
thousands separators, currency, a percent sign, a sign, decimals or a simple fraction.

>>> extract_answer("<reasoning>2+2</reasoning><answer>$1,234.50</answer>")
Extraction(value=1234.5, method='answer_tag', text='$1,234.50')
>>> is_correct("<answer>-3/4</answer>", "-0.75")
True
"""

from __future__ import annotations

import dataclasses
import math
import re
from fractions import Fraction

__all__ = [
    "ANSWER_TAG_RE", "BOXED_RE", "Extraction", "HASH_RE", "NUMBER_RE", "OPEN_ANSWER_RE",
    "THE_ANSWER_RE", "extract_answer", "format_number", "is_correct", "last_number",
    "numbers_equal", "parse_number",
]  # fmt: skip

# A number: optional sign and currency, digits with optional thousands commas, decimals,
# optional fraction part, optional percent.
_NUM = r"[-+−]?\s?[$€£]?\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s?/\s?\d+(?:\.\d+)?)?\s?%?|[-+−]?\.\d+"
NUMBER_RE = re.compile(_NUM)
ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
OPEN_ANSWER_RE = re.compile(r"<answer>(.*)$", re.S | re.I)
BOXED_RE = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
THE_ANSWER_RE = re.compile(r"answer\s+is\s*:?\s*(.{0,40})", re.I)
HASH_RE = re.compile(r"####\s*(.{0,40})")
_LATEX_FRAC_RE = re.compile(r"\\d?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")


@dataclasses.dataclass(frozen=True)
class Extraction:
    """A parsed answer: its numeric value (``None`` if not a number), how it was found, the text."""

    value: float | None
    method: str
    text: str


def parse_number(text: str) -> float | None:
    """Parse the first number in ``text``, understanding ``1,234``, ``$5``, ``40%``, ``3/4``.

    Percent signs are dropped (``40%`` is 40, as GSM8K writes answers), fractions are divided.

    >>> [parse_number(s) for s in ["1,234", "$5.50", "40%", "-3/4", "−7", "1/0", "abc"]]
    [1234.0, 5.5, 40.0, -0.75, -7.0, None, None]
    >>> parse_number(r"\\frac{1}{2}")
    0.5
    """
    if text is None:
        return None
    text = _LATEX_FRAC_RE.sub(r"\1/\2", text)
    m = NUMBER_RE.search(text)
    if not m:
        return None
    raw = m.group(0).replace("−", "-")
    raw = re.sub(r"[\s$€£%,]", "", raw)
    try:
        if "/" in raw:
            num, den = raw.split("/", 1)
            if float(den) == 0:
                return None
            return float(Fraction(num) / Fraction(den))
        return float(raw)
    except (ValueError, ZeroDivisionError):
        return None


def last_number(text: str) -> float | None:
    """The value of the last number in ``text``.

    >>> last_number("3 apples, then 12 more: 15")
    15.0
    """
    found = NUMBER_RE.findall(_LATEX_FRAC_RE.sub(r"\1/\2", text or ""))
    for raw in reversed(found):
        value = parse_number(raw)
        if value is not None:
            return value
    return None


def extract_answer(completion: str, *, strict: bool = False) -> Extraction:
    """Find the final answer in a completion.

    With ``strict=True`` only a closed ``<answer>...</answer>`` block counts (the reward and the
    hackathon format); otherwise the fallbacks in the module docstring apply, in order.

    >>> extract_answer("so the answer is 42.").method
    'the_answer_is'
    >>> extract_answer("The total is 7 + 8 = 15", strict=True).value is None
    True
    >>> extract_answer("<answer>7 + 8 = 15</answer>").value
    15.0
    """
    completion = completion or ""
    tags = ANSWER_TAG_RE.findall(completion)
    if tags:
        inner = tags[-1].strip()
        # "<answer>5 + 5 = 10</answer>": the result is what follows the last "="
        return Extraction(parse_number(inner.rsplit("=", 1)[-1]), "answer_tag", inner)
    if strict:
        return Extraction(None, "none", "")
    opened = OPEN_ANSWER_RE.search(completion)
    if opened and parse_number(opened.group(1)) is not None:
        return Extraction(parse_number(opened.group(1)), "open_answer_tag", opened.group(1).strip())
    for method, regex in (
        ("boxed", BOXED_RE),
        ("the_answer_is", THE_ANSWER_RE),
        ("hashes", HASH_RE),
    ):
        hits = regex.findall(completion)
        if hits and parse_number(hits[-1]) is not None:
            return Extraction(parse_number(hits[-1]), method, hits[-1].strip())
    value = last_number(completion)
    return Extraction(value, "last_number" if value is not None else "none", "")


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
    """Whether the completion's final answer equals ``gold`` numerically.

    >>> is_correct("<answer>1,000</answer>", "1000"), is_correct("<answer>99</answer>", 100)
    (True, False)
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
