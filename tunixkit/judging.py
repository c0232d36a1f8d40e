"""Judging answers without a ground truth: an LLM judge (or any grader) against a rubric.

- :class:`Judge`: a judge model (:func:`llm_grader`: loaded with the same loader, its expected
  score read from the probabilities of the score digits) or any grader scoring each completion
  against a rubric (:class:`JudgeRubric`), batched, never re-judging a completion it has seen,
  timing itself; it is a TRL-style reward function, as tunix's ``GRPOLearner`` calls them;
- :func:`parse_score` turns any text reply, garbage included, into a number in [0, 1].

The rubric rewards that need no judge (structure, length, repetition, boilerplate, relevance) and
:func:`~tunixkit.rewards.weighted` live with every other reward in :mod:`tunixkit.rewards`.
"""

from __future__ import annotations

import math
import numbers
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tunixkit import evaluation

if TYPE_CHECKING:
    from tunixkit.models import LoadedModel

__all__ = [
    "JUDGE_BATCH",
    "JUDGE_PROMPT_LENGTH",
    "Judge",
    "JudgeRubric",
    "expected_score",
    "llm_grader",
]

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

    def report(self) -> dict[str, float]:
        """What ``summary.json`` keeps of the judge: its mean seconds per call, the completions
        it graded, and the judge prompts whose question lost its middle to fit the answer."""
        return {
            "judge_seconds_per_call": sum(self.seconds) / max(1, len(self.seconds)),
            "judged_completions": self.calls,
            "judge_prompts_cut": self.prompts_cut,
        }

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
