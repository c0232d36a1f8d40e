"""Reward functions for GRPO in the ``<reasoning>...</reasoning><answer>...</answer>`` format.

Each is ``fn(prompts, completions, **kwargs) -> list[float]``, as tunix's ``GRPOLearner`` calls
them: ``kwargs`` carries every other dataset column repeated per generation (``answer`` here),
plus ``trajectory_ids`` and ``mode``; several functions are summed. All are pure, never raise on
any string, and are bounded: :func:`reward` registers each in :data:`REWARDS` with its bounds, and
the property tests check every registered reward (a new one is tested by being registered).

The rewards that read the gold ``answer`` read the completion's answer with the one policy of
:mod:`tunixkit.answers` (:func:`~tunixkit.answers.extract_answer`): the conclusion's number, and
a hedge (``7 or 8``, two ``<answer>`` blocks that differ) is a wrong number, so listing candidates
never scores above answering one wrong number.

>>> done = "<reasoning>3 + 4 = 7</reasoning>\\n<answer>7</answer>"
>>> format_exact([""], [done]), answer_match([""], [done], answer=["7"])
([3.0], [3.0])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from tunixkit.answers import extract_answer, is_correct, numbers_equal, parse_number
from tunixkit.prompting import ANSWER_END, ANSWER_START, REASONING_END, REASONING_START

FORMAT_RE = re.compile(
    r"^\s*<reasoning>(?:(?!</?(?:reasoning|answer)>).)+?</reasoning>\s*"
    r"<answer>(?:(?!</?(?:reasoning|answer)>).)+?</answer>\s*(?:<end_of_turn>)?\s*$",
    re.S,
)
__all__ = [
    "DEFAULT_REWARDS",
    "answer_match",
    "format_approx",
    "format_exact",
    "number_match",
    "reward",
    "strict_answer",
]

RewardFn = Callable[..., list[float]]
REWARDS: dict[str, RewardFn] = {}  # every reward function, by name; each has ``.bounds``


def reward(low: float, high: float) -> Callable[[RewardFn], RewardFn]:
    """Register a reward function in :data:`REWARDS` with the bounds its values stay within."""

    def register(fn: RewardFn) -> RewardFn:
        fn.bounds = (low, high)  # type: ignore[attr-defined]
        REWARDS[fn.__name__] = fn
        return fn

    return register


TAGS = (REASONING_START, REASONING_END, ANSWER_START, ANSWER_END)  # the format's four tags


def has_format(completion: str) -> bool:
    """Exactly one reasoning block then one answer block, nothing before or after.

    >>> has_format("<reasoning>x</reasoning><answer>1</answer>"), has_format("<answer>1</answer>")
    (True, False)
    >>> has_format("<reasoning>x <answer>2</reasoning><answer>1</answer>")  # a tag inside a block
    False
    """
    return bool(FORMAT_RE.match(completion or ""))


@reward(0.0, 3.0)
def format_exact(prompts: Sequence[str], completions: Sequence[str], **kwargs: Any) -> list[float]:
    """3.0 when the completion is exactly ``<reasoning>..</reasoning><answer>..</answer>``, else 0.

    Args:
        prompts: the prompts (unused).
        completions: the generated texts.
    Returns:
        one reward per completion, in [0, 3].

    >>> format_exact(["q", "q"], ["<reasoning>r</reasoning>\\n<answer>5</answer>", "5"])
    [3.0, 0.0]
    """
    return [3.0 if has_format(c) else 0.0 for c in completions]


@reward(-2.0, 2.0)
def format_approx(prompts: Sequence[str], completions: Sequence[str], **kwargs: Any) -> list[float]:
    """+0.5 for each of the four tags present exactly once, -0.5 for each missing or repeated.

    Returns:
        one reward per completion, in [-2, 2].

    >>> format_approx(["q"], ["<reasoning>r</reasoning><answer>5"])
    [1.0]
    """
    return [sum(0.5 if (c or "").count(t) == 1 else -0.5 for t in TAGS) for c in completions]


@reward(-1.0, 3.0)
def answer_match(
    prompts: Sequence[str], completions: Sequence[str], *, answer: Sequence[str], **kwargs: Any
) -> list[float]:
    """3.0 for the exact answer in ``<answer>``; partial credit near it; -1 for a wrong number.

    Partial credit: 1.5 within 10% of the gold answer, 0.5 within 20%; 0 when there is no answer.
    A hedge (``7 or 8``, or two ``<answer>`` blocks that differ) is a wrong number: -1, never
    partial credit.

    Args:
        completions: the generated texts.
        answer: gold answers, one per completion.
    Returns:
        one reward per completion, in [-1, 3].

    >>> answer_match(["q"] * 4,
    ...              ["<answer>100</answer>", "<answer>95</answer>", "<answer>7</answer>", "none"],
    ...              answer=["100"] * 4)
    [3.0, 1.5, -1.0, 0.0]
    >>> hedged, settled = "<answer>99 or 100</answer>", "<answer>from 90 to 100, so 100</answer>"
    >>> answer_match(["q"] * 2, [hedged, settled], answer=["100"] * 2)
    [-1.0, 3.0]
    """
    out = []
    for c, gold in zip(completions, answer, strict=True):
        found, want = extract_answer(c, strict=True), parse_number(str(gold))
        got = found.value
        if want is not None and found.hedge:
            out.append(-1.0)
        elif got is None or want is None:
            out.append(0.0)
        elif numbers_equal(got, want):
            out.append(3.0)
        else:
            ratio = abs(got - want) / max(abs(want), 1e-9)
            out.append(1.5 if ratio <= 0.1 else 0.5 if ratio <= 0.2 else -1.0)
    return out


@reward(0.0, 1.5)
def number_match(
    prompts: Sequence[str], completions: Sequence[str], *, answer: Sequence[str], **kwargs: Any
) -> list[float]:
    """1.5 when the completion's answer equals the gold answer, read leniently: the ``<answer>``
    block, or without one ``\\boxed{}``, "the answer is", ``####`` or the last sentence
    (:func:`~tunixkit.answers.is_correct` with ``strict=False``); a hedge earns nothing.

    Returns:
        one reward per completion, in [0, 1.5].

    >>> number_match(["q", "q"], ["so 1,200 total", "<answer>12 apples</answer>"],
    ...              answer=["1200", "12"])
    [1.5, 1.5]
    >>> number_match(["q"], ["<answer>12 or 13</answer>"], answer=["12"])
    [0.0]
    """
    return [
        1.5 if is_correct(c or "", str(gold)) else 0.0
        for c, gold in zip(completions, answer, strict=True)
    ]


@reward(-1.0, 3.0)
def strict_answer(
    prompts: Sequence[str],
    completions: Sequence[str],
    *,
    answer: Sequence[str],
    max_chars: int = 2000,
    **kwargs: Any,
) -> list[float]:
    """Like :func:`answer_match`, but nothing for unformatted, unterminated or rambling output.

    A completion earns a reward only if it has the exact format and at most ``max_chars``
    characters; otherwise 0 (or -1 when it rambles past ``max_chars``).

    >>> strict_answer(["q", "q"],
    ...               ["<reasoning>r</reasoning><answer>4</answer>", "<answer>4</answer>"],
    ...               answer=["4", "4"])
    [3.0, 0.0]
    """
    base = answer_match(prompts, completions, answer=answer)
    return [
        -1.0 if len(c or "") > max_chars else (b if has_format(c) else 0.0)
        for c, b in zip(completions, base, strict=True)
    ]


DEFAULT_REWARDS = (format_exact, format_approx, answer_match, number_match)
