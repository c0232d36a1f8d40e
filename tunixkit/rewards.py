"""Reward functions for GRPO in the ``<reasoning>...</reasoning><answer>...</answer>`` format.

Each is ``fn(prompts, completions, **kwargs) -> list[float]``, as tunix's ``GRPOLearner`` calls
them: ``kwargs`` carries every other dataset column repeated per generation (``answer`` here),
plus ``trajectory_ids`` and ``mode``; several functions are summed. All are pure, never raise on
any string, and are bounded: :func:`reward` registers each in :data:`REWARDS` with its bounds, and
the property tests check every registered reward (a new one is tested by being registered).

The rewards that read the gold ``answer`` read the completion's answer with the one policy of
:mod:`tunixkit.answers` (:func:`~tunixkit.answers.extract_answer`): the conclusion's number, and
a hedge (``7 or 8``, two ``<answer>`` blocks that differ) is a wrong number, so listing candidates
never scores above answering one wrong number. The rubric rewards need no gold answer
(:func:`structure`, :func:`length_limit`, :func:`length_target`, :func:`repetition`,
:func:`no_boilerplate`, :func:`relevance`: notebook 06's GRPO weighs them by name, with
:func:`weighted`); the judge's reward is :class:`tunixkit.judging.Judge`.

>>> done = "<reasoning>3 + 4 = 7</reasoning>\\n<answer>7</answer>"
>>> format_exact([""], [done]), answer_match([""], [done], answer=["7"])
([3.0], [3.0])
"""

from __future__ import annotations

import collections
import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from tunixkit.answers import (
    ANSWER_TAG_RE,
    extract_answer,
    is_correct,
    latex_answer,
    latex_correct_isolated,
    numbers_equal,
    parse_number,
)
from tunixkit.families import FAMILIES
from tunixkit.prompting import ANSWER_END, ANSWER_START, REASONING_END, REASONING_START

# Any family's end of turn may close the answer (a decoded completion can keep its stop piece).
_END_OF_TURN = "|".join(sorted({re.escape(f.end_of_turn) for f in FAMILIES.values()}))
FORMAT_RE = re.compile(
    r"^\s*<reasoning>(?:(?!</?(?:reasoning|answer)>).)+?</reasoning>\s*"
    rf"<answer>(?:(?!</?(?:reasoning|answer)>).)+?</answer>\s*(?:{_END_OF_TURN})?\s*$",
    re.S,
)
__all__ = [
    "DEFAULT_REWARDS",
    "LATEX_REWARDS",
    "answer_match",
    "format_approx",
    "format_exact",
    "latex_answer_match",
    "length_target",
    "number_match",
    "relevance",
    "repetition",
    "reward",
    "strict_answer",
    "structure",
    "weighted",
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


@reward(-1.0, 3.0)
def latex_answer_match(
    prompts: Sequence[str], completions: Sequence[str], *, answer: Sequence[str], **kwargs: Any
) -> list[float]:
    r"""For MATH-style data (LaTeX answers: fractions, radicals, intervals, sets, text): 3.0 when
    the ``<answer>`` block's final answer equals the gold one as math-verify decides (the same
    check as notebook 05's, :func:`~tunixkit.answers.latex_correct`), -1 for a wrong answer and
    for a hedge (several different answers listed earn what a wrong one does), 0 without an
    ``<answer>`` block. From tunix's reward thread each check runs in a worker process with a
    time limit (:func:`~tunixkit.answers.latex_correct_isolated`).

    Returns:
        one reward per completion, in [-1, 3].

    >>> latex_answer_match(["q"] * 4, [r"<answer>\frac{1}{2}</answer>", "<answer>0.5</answer>",
    ...                                r"<answer>\frac{1}{2} or 3</answer>", "1/2"],
    ...                    answer=[r"\frac{1}{2}"] * 4)
    [3.0, 3.0, -1.0, 0.0]
    """
    found = [latex_answer(c or "", strict=True) for c in completions]
    correct = latex_correct_isolated(list(completions), [str(a) for a in answer], strict=True)
    return [
        3.0 if ok else 0.0 if f.text is None and not f.hedge else -1.0
        for f, ok in zip(found, correct, strict=True)
    ]


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


# Rubric rewards: for answers without a ground truth (notebook 06's GRPO, by name in its weights).

BOILERPLATE = (
    "as an ai language model",
    "as an ai",
    "i'm sorry, but",
    "i cannot help",
    "i am unable to",
    "as a language model",
    "i don't have personal",
)
_WORD_RE = re.compile(r"[a-z0-9]+")


def answer_text(completion: str) -> str:
    """The text of the last ``<answer>`` block, or the whole completion when there is none.

    >>> answer_text("<reasoning>r</reasoning><answer> Paris </answer>"), answer_text("just text")
    ('Paris', 'just text')
    """
    found = ANSWER_TAG_RE.findall(completion or "")
    return (found[-1] if found else completion or "").strip()


@reward(-1.0, 0.0)
def length_limit(
    prompts: Sequence[str], completions: Sequence[str], *, max_chars: int = 4000, **kwargs: Any
) -> list[float]:
    """0 within ``max_chars`` (the 1K-token answers the judges allow are ~4,000 characters), then
    falling linearly to -1 at twice the limit.

    >>> length_limit(["q", "q"], ["short", "x" * 6000])
    [0.0, -0.5]
    """
    return [0.0 - min(1.0, max(0, len(c or "") - max_chars) / max_chars) for c in completions]


@reward(-1.0, 0.0)
def length_target(
    prompts: Sequence[str],
    completions: Sequence[str],
    *,
    target_chars: int = 2400,
    cap_chars: int = 3200,
    **kwargs: Any,
) -> list[float]:
    """Length shaping under a 768-token generation limit (~3,200 characters): 0 up to
    ``target_chars`` (~600 tokens), then falling linearly to -1 at ``cap_chars``; an answer left
    open (an ``<answer>`` with no ``</answer>`` after it, or none at all past the target: what
    hitting the limit leaves) gets -1 whatever its length.

    >>> length_target(["q"] * 4, ["<answer>a</answer>", "<answer>" + "x" * 2983 + "</answer>",
    ...                           "<reasoning>r</reasoning><answer>cut off", "x" * 2500])
    [0.0, -0.75, -1.0, -1.0]
    """
    out = []
    for c in completions:
        c = c or ""
        last = c.rfind(ANSWER_START)
        unclosed = ANSWER_END not in c[last:] if last >= 0 else len(c) > target_chars
        over = max(0, len(c) - target_chars) / max(1, cap_chars - target_chars)
        out.append(-1.0 if unclosed else 0.0 - min(1.0, over))
    return out


@reward(0.0, 1.0)
def structure(prompts: Sequence[str], completions: Sequence[str], **kwargs: Any) -> list[float]:
    """1 for the exact ``<reasoning>``/``<answer>`` structure, 0.5 when both blocks are there but
    out of shape, 0 otherwise.

    >>> structure(["q"] * 3, ["<reasoning>r</reasoning><answer>a</answer>",
    ...                       "<answer>a</answer><reasoning>r</reasoning>", "a"])
    [1.0, 0.5, 0.0]
    """
    out = []
    for c in completions:
        c = c or ""
        both = all(t in c for t in TAGS)
        out.append(1.0 if has_format(c) else 0.5 if both else 0.0)
    return out


@reward(-1.0, 0.0)
def repetition(
    prompts: Sequence[str], completions: Sequence[str], *, n: int = 3, **kwargs: Any
) -> list[float]:
    """Minus the share of repeated word ``n``-grams: 0 for text that never repeats itself, towards
    -1 for a loop.

    >>> repetition(["q", "q"], ["one two three four five", "go on go on go on go on go on"])
    [0.0, -0.75]
    """
    out = []
    for c in completions:
        words = _WORD_RE.findall((c or "").lower())
        grams = [tuple(words[i : i + n]) for i in range(max(0, len(words) - n + 1))]
        out.append(len(set(grams)) / len(grams) - 1.0 if grams else 0.0)
    return out


@reward(-1.0, 0.0)
def no_boilerplate(
    prompts: Sequence[str], completions: Sequence[str], **kwargs: Any
) -> list[float]:
    """-1 for the "As an AI language model" kind of phrase (:data:`BOILERPLATE`), else 0.

    >>> no_boilerplate(["q", "q"], ["As an AI language model, I think so.", "I think so."])
    [-1.0, 0.0]
    """
    return [-1.0 if any(p in (c or "").lower() for p in BOILERPLATE) else 0.0 for c in completions]


@reward(0.0, 1.0)
def relevance(prompts: Sequence[str], completions: Sequence[str], **kwargs: Any) -> list[float]:
    """TF-IDF cosine similarity between each prompt and its answer (IDF over this batch): a cheap
    signal that the answer is about the question, with no judge model.

    >>> [round(x, 2) for x in relevance(["the moon orbits earth", "bake bread"],
    ...                                 ["the moon orbits", "tax law"])]
    [0.81, 0.0]
    """
    docs = [
        _WORD_RE.findall((t or "").lower())
        for t in [*prompts, *(answer_text(c) for c in completions)]
    ]
    df = collections.Counter(w for d in docs for w in set(d))
    idf = {w: math.log((1 + len(docs)) / (1 + n)) + 1.0 for w, n in df.items()}

    def vec(words: list[str]) -> dict[str, float]:
        tf = collections.Counter(words)
        return {w: c * idf[w] for w, c in tf.items()}

    out = []
    for p, c in zip(docs[: len(prompts)], docs[len(prompts) :], strict=True):
        a, b = vec(p), vec(c)
        dot = sum(v * b.get(w, 0.0) for w, v in a.items())
        norm = math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))
        out.append(min(1.0, dot / norm) if norm else 0.0)
    return out


DEFAULT_REWARDS = (format_exact, format_approx, answer_match, number_match)
# MATH-style data (LaTeX answers): the format, and the answer as math-verify decides
LATEX_REWARDS = (format_exact, format_approx, latex_answer_match)


def weighted(fn: RewardFn, weight: float, name: str | None = None) -> RewardFn:
    """``fn`` times ``weight``, keeping a name of its own so tunix logs it as its own curve.

    >>> w = weighted(length_limit, 2.0)
    >>> w.__name__, w(["q"], ["x" * 6000])
    ('length_limit_x2', [-1.0])
    """

    @functools.wraps(fn)
    def scaled(prompts: Sequence[str], completions: Sequence[str], **kwargs: Any) -> list[float]:
        return [weight * float(v) for v in fn(prompts, completions, **kwargs)]

    scaled.__name__ = name or f"{getattr(fn, '__name__', 'reward')}_x{weight:g}"
    if hasattr(fn, "bounds"):
        scaled.bounds = tuple(sorted(weight * b for b in fn.bounds))  # type: ignore[attr-defined]
    return scaled
