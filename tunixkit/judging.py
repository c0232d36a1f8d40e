"""Rewards for answers without a ground truth: rubric checks, an LLM judge, prompt relevance,
weights.

All are TRL-style reward functions, ``fn(prompts, completions, **kwargs) -> list[float]``, as
tunix's ``GRPOLearner`` calls them and as :mod:`tunixkit.rewards` defines them; each is registered
with its bounds in :data:`tunixkit.rewards.REWARDS`, so the property tests feed it any string.

- rubric: :func:`length_limit`, :func:`structure`, :func:`repetition`, :func:`no_boilerplate`;
- :class:`Judge`: a judge model (:func:`llm_grader`: loaded with the same loader, its expected
  score read from the probabilities of the score digits) or any grader scoring each completion
  against a rubric, batched, never re-judging a completion it has seen, timing itself;
  :func:`parse_score` turns any text reply, garbage included, into a number in [0, 1];
- :func:`relevance`: TF-IDF cosine between prompt and answer, for when no judge fits;
- :func:`weighted`: a reward scaled by its weight under its own name, so each is logged on its own.
"""

from __future__ import annotations

import collections
import functools
import math
import numbers
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tunixkit import evaluation
from tunixkit.answers import ANSWER_TAG_RE
from tunixkit.prompting import ANSWER_END, ANSWER_START
from tunixkit.rewards import TAGS, RewardFn, has_format, reward

if TYPE_CHECKING:
    from tunixkit.models import LoadedModel

__all__ = [
    "JUDGE_BATCH",
    "JUDGE_PROMPT_LENGTH",
    "Judge",
    "JudgeRubric",
    "expected_score",
    "length_target",
    "llm_grader",
    "relevance",
    "repetition",
    "structure",
    "weighted",
]

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


_SCORE_RE = re.compile(
    r"(-?\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+(?:\.\d+)?)"
    r"|(?:score|rating)\s*[:=]?\s*(-?\d+(?:\.\d+)?)"
    r"|(-?\d+(?:\.\d+)?)",
    re.I,
)


def parse_score(reply: Any, scale: float = 10.0) -> float:
    """Any judge reply -> a score in [0, 1]: "7/10", "Score: 8", "8 out of 10", a bare number (on a
    ``scale`` of 0..10 by default); a reply with no number, or anything that is not text, gives 0.

    >>> [parse_score(r)
    ...  for r in ("Score: 8", "7/10", "9 out of 10 because", "great!", None, "42", "-3")]
    [0.8, 0.7, 0.9, 0.0, 0.0, 1.0, 0.0]
    """
    if not isinstance(reply, str):
        return 0.0
    m = _SCORE_RE.search(reply)
    if m is None:
        return 0.0
    try:
        if m.group(1) is not None:
            value, top = float(m.group(1)), float(m.group(2)) or scale
        else:
            value, top = float(m.group(3) or m.group(4)), scale
    except (TypeError, ValueError):
        return 0.0
    score = value / top
    return 0.0 if not math.isfinite(score) else min(1.0, max(0.0, score))


def _score(reply: Any) -> float:
    """A grader's reply as a score in [0, 1]: a number as it is (clipped; not finite: 0), NumPy's
    included, text through :func:`parse_score`.

    >>> _score(0.75), _score("Score: 8"), _score(float("nan")), _score(1.5)
    (0.75, 0.8, 0.0, 1.0)
    >>> _score(np.float32(0.25)), _score(np.float16(2.0)), _score(True)
    (0.25, 1.0, 0.0)
    """
    if isinstance(reply, numbers.Real) and not isinstance(reply, (bool, np.bool_)):
        return min(1.0, max(0.0, float(reply))) if math.isfinite(reply) else 0.0
    return parse_score(reply)


class JudgeRubric:
    """The prompt a judge model sees for one (question, response) pair, with the criteria of the
    question's domain (``domain_of``: question -> domain; :data:`CRITERIA`, else the general ones).

    >>> rubric = JudgeRubric(domain_of={"Summarize: the text.": "summarization"})
    >>> ("nothing invented" in rubric("Summarize: the text.", "r"),
    ...  "nothing invented" in rubric("Hi?", "r"))
    (True, False)
    """

    CRITERIA = {
        "general": "it answers what was asked, and it is correct and helpful",
        "creative": "it follows the requested form, tone and length, and it is original, vivid and "
        "coherent",
        "ideation": "it gives several distinct, specific and feasible ideas that fit the request",
        "summarization": "it is faithful to the source (nothing invented), covers its main points "
        "and is concise",
        "science": "it is scientifically accurate, explains why with correct terms, and has no "
        "misconception",
        "math": "its final answer is correct, reached by valid step-by-step reasoning",
        "code": "its code is correct and runnable and does what was asked, with a short "
        "explanation",
    }
    TEMPLATE = (
        "You are grading a response to a {domain} task. Criteria: {criteria}; it is clear and well "
        "organised, and it puts its reasoning in <reasoning> and its final answer in <answer>.\n"
        "Question: {question}\nResponse: {answer}\n"
        "Reply with one line: Score: N, where N is a digit from 0 (useless) to 9 (excellent)."
    )

    def __init__(
        self,
        template: str | None = None,
        *,
        domain_of: dict[str, str] | None = None,
        criteria: dict[str, str] | None = None,
    ) -> None:
        self.template = template or self.TEMPLATE
        self.domain_of = dict(domain_of or {})
        self.criteria = {**self.CRITERIA, **(criteria or {})}

    def __call__(self, question: str, answer: str) -> str:
        domain = self.domain_of.get(question, "general")
        criteria = self.criteria.get(domain, self.criteria["general"])
        return self.template.format(
            question=question, answer=answer, domain=domain, criteria=criteria
        )


# Judge prompt tokens: the rubric (~100) and the question (a summarization prompt holds its
# document) around a whole answer at the generation limit (768 tokens; the judges read up to 1K), in
# the chat template. A longer prompt loses the middle of its question, never the answer
# (fit_prompt).
JUDGE_PROMPT_LENGTH = 2048
# Rubric prompts scored in one forward pass (the memory plan's judge_score step compiles this
# batch at JUDGE_PROMPT_LENGTH, beside GRPO's state).
JUDGE_BATCH = 16
# The judge's reply starts with this; its next token is the score digit (0-9) whose
# probabilities llm_grader reads.
SCORE_PREFIX = "Score: "
SCORE_DIGITS = tuple("0123456789")


def _cut_middle(text: str, keep: int) -> str:
    """``text`` with its middle replaced by `` [...] `` so that ``keep`` of its characters remain.

    >>> _cut_middle("abcdefghij", 4), _cut_middle("abc", 5), _cut_middle("abc", 0)
    ('ab [...] ij', 'abc', '[...]')
    """
    if keep >= len(text):
        return text
    if keep <= 0:
        return "[...]"
    return text[: keep - keep // 2] + " [...] " + text[len(text) - keep // 2 :]


def fit_prompt(
    rubric: Callable[[str, str], str],
    question: str,
    answer: str,
    count: Callable[[str], int],
    limit: int,
) -> tuple[str, bool]:
    """``rubric(question, answer)`` within ``limit`` tokens (``count``: tokens of a text), and
    whether it was cut. The answer is what is judged, so it is kept whole: the middle of the
    question goes first, and only a question already cut to nothing lets the answer lose its middle.

    >>> words = lambda s: len(s.split())
    >>> rubric = lambda q, a: f"Q: {q} A: {a}"
    >>> fit_prompt(rubric, "one two three four five six", "the answer stays whole", words, 10)
    ('Q: one [...] ix A: the answer stays whole', True)
    >>> fit_prompt(rubric, "short", "ok", words, 10)
    ('Q: short A: ok', False)
    """
    prompt = rubric(question, answer)
    if count(prompt) <= limit:
        return prompt, False
    parts = {"question": question, "answer": answer}
    for part in parts:
        while (over := count(prompt) - limit) > 0 and parts[part] != "[...]":
            text = parts[part]
            per_token = len(text) / max(1, count(text))
            keep = min(len(text) - 8, len(text) - int((over + 3) * per_token))
            parts[part] = _cut_middle(text, keep)
            prompt = rubric(parts["question"], parts["answer"])
    return prompt, True


def expected_score(probs: Sequence[float]) -> float:
    """The mean score in [0, 1] under a judge's probabilities of the digits 0..9 after "Score: "
    (renormalised over the digits; 0 when it puts no probability on any).

    >>> expected_score([0.0] * 9 + [0.5]), expected_score([0.5, 0, 0, 0, 0, 0, 0, 0, 0, 0.5])
    (1.0, 0.5)
    >>> round(expected_score([0, 0, 0, 0, 0, 0, 0, 0.25, 0.5, 0.25]), 3), expected_score([0] * 10)
    (0.889, 0.0)
    """
    mass = float(sum(probs))
    top = len(probs) - 1
    return float(sum(p * d for d, p in enumerate(probs)) / (mass * top)) if mass > 0 else 0.0


def llm_grader(
    judge_model: LoadedModel,
    *,
    rubric: JudgeRubric | None = None,
    max_prompt_length: int = JUDGE_PROMPT_LENGTH,
    batch_size: int = JUDGE_BATCH,
) -> Callable[[list[str], list[str]], list[float]]:
    """A grader that asks ``judge_model`` (a :class:`tunixkit.models.LoadedModel`: the same loader,
    on the policy's mesh or one of its own) to score each whole response (reasoning, answer and
    tags, as the judges read it) against ``rubric``, and returns its expected score: the judge's
    reply is begun for it (:data:`SCORE_PREFIX`), and the probabilities of the ten digits it could
    write next give the mean score (:func:`expected_score`), not one greedy digit: two answers the
    judge would both give a greedy 7 are told apart, and GRPO's rewards vary within a group. One
    forward pass scores a batch (:class:`tunixkit.evaluation.ChoiceScorer`: no decoding, one
    position's logits). The share of probability the judge put on the digits is kept in the
    grader's ``mass`` (sum) and said when a batch's mean is under one half: such a judge is not
    answering the rubric. A rubric prompt over ``max_prompt_length`` loses the middle of its
    question (:func:`fit_prompt`), never the answer; such prompts are printed and counted in the
    grader's ``cut`` (and ``judged``: all prompts)."""
    rubric = rubric or JudgeRubric()
    scorer = evaluation.ChoiceScorer(
        judge_model, SCORE_DIGITS, max_prompt_length=max_prompt_length, batch_size=batch_size
    )
    prefix_tokens = len(judge_model.tokenizer.encode(SCORE_PREFIX))

    def count(text: str) -> int:  # the template's tokens, the score prefix and BOS included
        return len(judge_model.tokenizer.encode(judge_model.chat.prompt(text))) + prefix_tokens + 1

    def grade(questions: list[str], completions: list[str]) -> list[float]:
        fitted = [
            fit_prompt(rubric, q, c or "", count, max_prompt_length)
            for q, c in zip(questions, completions, strict=True)
        ]
        cut = sum(was_cut for _, was_cut in fitted)
        grade.cut += cut
        grade.judged += len(fitted)
        if cut:
            print(
                f"judge: {cut} of {len(fitted)} prompts over {max_prompt_length} tokens: the "
                f"middle of the question was cut, the answer kept whole ({grade.cut} so far)"
            )
        probs = scorer([judge_model.chat.prompt(text) + SCORE_PREFIX for text, _ in fitted])
        masses = probs.sum(axis=1)
        grade.mass += float(masses.sum())
        if len(masses) and masses.mean() < 0.5:
            print(
                f"judge: only {masses.mean():.0%} of its probability on a score digit after "
                f"{SCORE_PREFIX!r} ({len(masses)} prompts): it is not answering the rubric"
            )
        return [expected_score(p) for p in probs]

    grade.cut, grade.judged, grade.mass = 0, 0, 0.0
    return grade


class Judge:
    """Grades completions with ``grade(questions, completions) -> replies`` (a judge model's
    expected scores in [0, 1], see :func:`llm_grader`, or text replies read by
    :func:`parse_score`: a deterministic grader in smoke, any text-writing grader); it is a reward
    function too.

    A completion already graded for the same question is not graded again; each call's time is kept
    in :attr:`seconds` (one entry per GRPO step), the number graded in :attr:`calls`.
    """

    def __init__(
        self,
        grade: Callable[[list[str], list[str]], list[str]],
        *,
        batch_size: int = 16,
        name: str = "judge",
    ) -> None:
        self.grade, self.batch_size = grade, batch_size
        self.__name__ = name  # tunix names the reward's metric after it
        self.cache: dict[tuple[str, str], float] = {}
        self.seconds: list[float] = []
        self.calls = 0
        self.ignored: frozenset[str] = frozenset()  # domains scored 0 without grading (ignore)
        self.domain_of: dict[str, str] = {}

    def ignore(self, domains: Iterable[str], domain_of: Mapping[str, str]) -> None:
        """Score the questions of ``domains`` 0 without grading them (``domain_of``: question ->
        domain): the domains where the judge failed its calibration
        (:func:`tunixkit.domains.act_on_calibration`)."""
        self.ignored, self.domain_of = frozenset(domains), dict(domain_of)

    @property
    def prompts_cut(self) -> int:
        """Judge prompts whose question lost its middle to fit (:func:`llm_grader`; 0 for
        others)."""
        return getattr(self.grade, "cut", 0)

    def scores(self, questions: Sequence[str], completions: Sequence[str]) -> list[float]:
        t0 = time.perf_counter()
        keys = [(str(q), str(c)) for q, c in zip(questions, completions, strict=True)]
        for k in keys:
            if self.domain_of.get(k[0]) in self.ignored:
                self.cache[k] = 0.0
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        for i in range(0, len(todo), self.batch_size):
            chunk = todo[i : i + self.batch_size]
            try:
                replies = list(self.grade([q for q, _ in chunk], [c for _, c in chunk]))
            except Exception as e:  # noqa: BLE001
                # a failing judge costs the batch its reward, not the run
                print(f"judge: {type(e).__name__}: {e}; {len(chunk)} completions scored 0")
                replies = [""] * len(chunk)
            replies += [""] * (len(chunk) - len(replies))
            self.cache.update({k: _score(r) for k, r in zip(chunk, replies, strict=False)})
            self.calls += len(chunk)
        self.seconds.append(time.perf_counter() - t0)
        return [self.cache[k] for k in keys]

    def __call__(
        self, prompts: Sequence[str], completions: Sequence[str], **kwargs: Any
    ) -> list[float]:
        questions = kwargs.get("question", prompts)
        return self.scores([str(q) for q in questions], completions)


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
