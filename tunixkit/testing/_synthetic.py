"""The smoke profile's data: GSM8K-style problems and tasks of every judged domain, with a grader.

Built offline and deterministically, tiny-model sized (short answers over few words), so that CI
runs the real loaders and trainers on data in the real schemas:

- :func:`synthetic_gsm8k` / :func:`write_synthetic_gsm8k`: seeded GSM8K-style rows (``question``,
  ``answer`` with worked steps, ``<<calc>>`` notes and ``#### N``) that a tiny model can learn;
- :func:`synthetic_tasks`: tasks for every domain of notebook 06, each a :class:`Task` with a good
  reference response and what a grader looks for; :func:`uneven` gives part of them the domain's
  :data:`WEAK` answer, as real instruction data is uneven;
- :func:`rubric_grader`: a deterministic grader of those tasks with a judge's interface, the smoke
  profile's stand-in for a judge model (:class:`tunixkit.judging.Judge` wraps either).
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import random
from collections.abc import Callable, Sequence

from tunixkit import data, prompting
from tunixkit.answers import is_correct
from tunixkit.domains import DOMAINS
from tunixkit.rewards import answer_text, has_format

_NAMES = ("Tom", "Ann", "Bob", "Mia", "Sam", "Lea", "Max", "Zoe", "Ben", "Eva")
_ITEMS = ("apples", "pens", "books", "coins", "cards", "eggs", "shells", "stamps")


def _problem(rng: random.Random, max_operand: int = 30) -> tuple[str, str]:
    """One GSM8K-style (question, answer field) pair; sums and differences use operands <=
    ``max_operand``."""
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    kind = rng.randrange(4)
    hi = max_operand
    if kind == 0:
        a, b = rng.randint(2, hi), rng.randint(2, hi)
        q = f"{name} has {a} {item} and buys {b} more. How many {item} does {name} have now?"
        steps = f"{name} has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} {item}."
        ans = a + b
    elif kind == 1:
        a = rng.randint(5, hi + 10)
        b = rng.randint(1, a - 1)
        q = f"{name} has {a} {item} and gives {b} to a friend. How many {item} are left?"
        steps = f"{name} has {a} - {b} = <<{a}-{b}={a - b}>>{a - b} {item} left."
        ans = a - b
    elif kind == 2:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        q = f"{name} buys {a} boxes with {b} {item} in each box. How many {item} does {name} buy?"
        steps = f"{name} buys {a} * {b} = <<{a}*{b}={a * b}>>{a * b} {item}."
        ans = a * b
    else:
        a, b = rng.randint(2, min(hi, 20)), rng.randint(2, min(hi, 20))
        c = rng.randint(1, a + b - 1)
        q = (
            f"{name} has {a} {item}, buys {b} more and then gives {c} away. "
            f"How many {item} does {name} have?"
        )
        s = a + b
        steps = (
            f"{name} has {a} + {b} = <<{a}+{b}={s}>>{s} {item}.\n"
            f"After giving {c} away, {s} - {c} = <<{s}-{c}={s - c}>>{s - c} are left."
        )
        ans = s - c
    return q, f"{steps}\n#### {ans}"


def synthetic_gsm8k(n: int, seed: int = 0, *, max_operand: int = 30) -> list[dict[str, str]]:
    """``n`` seeded GSM8K-style rows in the raw GSM8K schema (``question``, ``answer``).

    ``max_operand`` bounds the numbers added and subtracted (products stay single-digit times
    single-digit): a small value gives an easier set of problems over a small set of facts.

    >>> rows = synthetic_gsm8k(2, seed=1)
    >>> sorted(rows[0]), rows[0]["answer"].splitlines()[-1].startswith("#### ")
    (['answer', 'question'], True)
    >>> synthetic_gsm8k(3, seed=5) == synthetic_gsm8k(3, seed=5)
    True
    """
    rng = random.Random(seed)
    return [
        dict(zip(("question", "answer"), _problem(rng, max_operand), strict=True)) for _ in range(n)
    ]


SPLIT_SEEDS = {"train": 0, "test": 1}
# Smoke problems add and subtract numbers up to 9 (products stay single digit x single digit): a
# 2-layer model learns these facts partially in a short warm start, which leaves GRPO room to help.
# With operands up to 30 most held-out sums are facts the model never saw, and no method moves them.
SMOKE_MAX_OPERAND = 9


def write_synthetic_gsm8k(
    folder: str | pathlib.Path,
    *,
    n_train: int = 2000,
    n_test: int = 200,
    max_operand: int | None = None,
) -> dict[str, pathlib.Path]:
    """Write ``train.jsonl`` and ``test.jsonl`` in the raw GSM8K schema, for the real file
    loaders (numbers up to ``max_operand``; None: the smoke profile's,
    :data:`SMOKE_MAX_OPERAND`)."""
    folder, max_operand = pathlib.Path(folder), max_operand or SMOKE_MAX_OPERAND
    return {
        split: data.write_jsonl(
            synthetic_gsm8k(n, seed=SPLIT_SEEDS[split], max_operand=max_operand),
            folder / f"{split}.jsonl",
        )
        for split, n in (("train", n_train), ("test", n_test))
    }


@dataclasses.dataclass(frozen=True)
class Task:
    """One prompt with a good reference response and what a grader checks (smoke tasks)."""

    domain: str
    prompt: str
    response: str  # <reasoning>..</reasoning><answer>..</answer>
    wants: tuple[str, ...] = ()  # words a good answer contains
    answer: str = ""  # math: the number

    def record(self) -> dict[str, str]:
        return {
            "domain": self.domain,
            "prompt": self.prompt,
            "response": self.response,
            "answer": self.answer,
        }


# --- the smoke profile's tasks: few words, so a 2-layer model can learn them in minutes.
_PLACES, _ANIMALS = ("park", "lake", "shop", "farm", "zoo"), ("dog", "cat", "bird", "fox", "duck")
_FEELS = ("small", "big", "happy", "quiet", "quick")
_POEMS = {
    "sea": ("blue", "deep"),
    "moon": ("pale", "bright"),
    "rain": ("soft", "cold"),
    "snow": ("white", "still"),
    "sun": ("warm", "gold"),
    "wind": ("wild", "free"),
    "river": ("long", "clear"),
}
_IDEAS = {
    "rainy day": ("read a book", "bake a cake", "play a game", "watch a film"),
    "picnic": ("pack fruit", "bring a ball", "find shade", "share bread"),
    "party": ("play music", "make a cake", "send cards", "dance"),
    "trip": ("pack light", "plan a route", "take a map", "bring water"),
}
_SCIENCE = {
    ("plant", "grow"): ("light", "water"),
    ("fish", "live"): ("water", "air"),
    ("fire", "burn"): ("air", "fuel"),
    ("seed", "grow"): ("soil", "water"),
}
_CODE = {"sum": ("add", "+"), "difference": ("sub", "-"), "product": ("mul", "*")}
_ARGS = (("a", "b"), ("x", "y"), ("m", "n"))


def _task(domain: str, rng: random.Random, asked: bool = False) -> Task:
    if domain == "summarization":
        name, place, animal, feel = (rng.choice(x) for x in (_NAMES, _PLACES, _ANIMALS, _FEELS))
        passage = (
            f"{name} went to the {place}. At the {place}, {name} saw a {feel} {animal}. "
            f"Then {name} went home."
        )
        answer = f"{name} saw a {feel} {animal} at the {place}."
        return Task(
            domain,
            f"Summarize in one sentence: {passage}",
            prompting.format_completion(f"The main event: {name} saw a {animal}.", answer),
            (name.lower(), animal, place),
        )
    if domain == "creative":
        topic = rng.choice(sorted(_POEMS))
        a, b = _POEMS[topic]
        ask = f"Write one line of poetry about the {topic}" + (
            f" for {rng.choice(_NAMES)}." if asked else "."
        )
        return Task(
            domain,
            ask,
            prompting.format_completion(
                f"The {topic} is {a} and {b}.", f"The {a} {topic} is {b} tonight."
            ),
            (topic, a, b),
        )
    if domain == "ideation":
        occasion = rng.choice(sorted(_IDEAS))
        ideas = rng.sample(_IDEAS[occasion], 3)
        listed = " ".join(f"{i}. {x}." for i, x in enumerate(ideas, 1))
        who = f"{rng.choice(_NAMES)} " if asked else ""
        return Task(
            domain,
            f"Give {who}three ideas for a {occasion}.",
            prompting.format_completion(f"Three things fit a {occasion}.", listed),
            tuple(_IDEAS[occasion]),
        )
    if domain == "science":
        (thing, verb), (f1, f2) = rng.choice(sorted(_SCIENCE.items()))
        ask = f"{rng.choice(_NAMES)} asks: what" if asked else "What"
        return Task(
            domain,
            f"{ask} does a {thing} need to {verb}?",
            prompting.format_completion(
                f"A {thing} uses {f1} and {f2}.", f"A {thing} needs {f1} and {f2} to {verb}."
            ),
            (f1, f2),
        )
    if domain == "code":
        what, (name, sym) = rng.choice(sorted(_CODE.items()))
        x, y = rng.choice(_ARGS) if asked else ("a", "b")
        code = f"def {name}({x}, {y}):\n    return {x} {sym} {y}"
        ask = (
            f"{rng.choice(_NAMES)} needs a Python function that returns the {what} of {x} and {y}."
            if asked
            else f"Write a Python function that returns the {what} of two numbers."
        )
        return Task(
            domain,
            ask,
            prompting.format_completion(f"Use {sym} on the two numbers.", code),
            ("def", "return", sym),
        )
    # math: the GSM8K-style problems
    row = synthetic_gsm8k(1, seed=rng.randrange(10**9), max_operand=SMOKE_MAX_OPERAND)[0]
    steps, answer = data.parse_gsm8k_answer(row["answer"])
    return Task(
        "math",
        row["question"],
        prompting.format_completion(steps, answer or ""),
        answer=answer or "",
    )


# Well-formed but empty answers, one per domain: the smoke judge gives them the format point only.
WEAK = {
    "summarization": prompting.format_completion(
        "Something happened.", "Someone went out and came back."
    ),
    "creative": prompting.format_completion("A line of poetry.", "It is a nice night."),
    "ideation": prompting.format_completion("Some ideas.", "1. have fun. 2. relax. 3. rest."),
    "science": prompting.format_completion("It needs things.", "It needs some care."),
    "code": prompting.format_completion("Write a function.", "It takes two numbers."),
}


def uneven(records: Sequence[dict[str, str]], good_share: float) -> list[dict[str, str]]:
    """``records`` with all but ``good_share`` of each domain's (spread evenly) answered by the
    domain's :data:`WEAK` response; math (checkable) and unknown domains keep theirs.

    Smoke SFT data made uneven, as real instruction data is: SFT learns both kinds of answer, and
    the stages after it have something to choose (notebook 07's warm start does the same).

    >>> rows = uneven([{"domain": "ideation", "response": "good"}] * 4, 0.5)
    >>> [r["response"] == WEAK["ideation"] for r in rows]
    [True, False, True, False]
    """
    counts = collections.Counter(r["domain"] for r in records)
    good = {d: data.spread(n, good_share) for d, n in counts.items()}
    seen: collections.Counter = collections.Counter()
    out = []
    for r in records:
        keep = good[r["domain"]][seen[r["domain"]]]
        seen[r["domain"]] += 1
        out.append(
            dict(r) if keep or r["domain"] not in WEAK else {**r, "response": WEAK[r["domain"]]}
        )
    return out


def synthetic_tasks(
    n: int, seed: int = 0, domains: Sequence[str] = DOMAINS, *, asked: bool = True
) -> list[Task]:
    """``n`` seeded tasks, the domains in turn (the smoke profile's multi-domain set).

    With ``asked`` (the default) the creative, ideation, science and code prompts name who asks (and
    code its arguments), giving 40-90 distinct prompts per domain instead of 3-7, so held-out
    prompts can be ones never trained on. ``asked=False`` is the older set, which the shipped smoke
    tokenizer was trained on (its corpus keeps it; the few words only the named prompts use, such as
    "asks", are spelled in pieces).
    """
    rng = random.Random(seed)
    return [_task(domains[i % len(domains)], rng, asked) for i in range(n)]


def _grade(task: Task, completion: str) -> float:
    """0..10 for ``completion`` on ``task``: the checks a judge would make, as rules."""
    if task.domain == "math":
        return (
            10.0
            if is_correct(completion, task.answer, strict=True)
            else (2.0 if has_format(completion) else 0.0)
        )
    answer = answer_text(completion).lower()
    words = answer.replace(".", " ").split()
    found = [w for w in task.wants if w.lower() in answer]
    if task.domain == "ideation":
        score = 3.0 * len(found)  # three of the occasion's ideas
    elif task.domain == "code":
        score = 3.0 * ("def" in found) + 3.0 * ("return" in found) + 4.0 * (task.wants[2] in answer)
    else:
        score = 9.0 * len(found) / max(1, len(task.wants))
    score += 1.0 if has_format(completion) else 0.0
    return min(10.0, score - (3.0 if len(words) > 25 else 0.0))


def rubric_grader(tasks: Sequence[Task]) -> Callable[[list[str], list[str]], list[str]]:
    """A grader for :func:`synthetic_tasks` with a judge's interface: (questions, completions) ->
    replies "Score: N" (N of 10). Questions it does not know get "no idea" (scored 0)."""
    by_prompt = {t.prompt: t for t in tasks}

    def grade(questions: list[str], completions: list[str]) -> list[str]:
        return [
            f"Score: {_grade(by_prompt[q], c):g}" if q in by_prompt else "no idea"
            for q, c in zip(questions, completions, strict=True)
        ]

    return grade
