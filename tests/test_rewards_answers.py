"""Rewards and answer checking: never raise on any string, bounded, and right on known cases."""

import inspect
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tunixkit import answers, judging, rewards

text = st.one_of(
    st.text(max_size=200),
    st.builds(
        lambda a, b: f"<reasoning>{a}</reasoning><answer>{b}</answer>",
        st.text(max_size=40),
        st.text(max_size=20),
    ),
)


@settings(max_examples=300, deadline=None)
@given(completion=text, gold=st.one_of(st.integers(-(10**6), 10**6).map(str), st.text(max_size=10)))
def test_every_registered_reward_never_raises_and_stays_bounded(completion, gold):
    assert (
        len(rewards.REWARDS) >= 10 and "relevance" in rewards.REWARDS
    )  # filled by the @reward decorator
    for name, fn in rewards.REWARDS.items():
        (value,) = fn(
            ["prompt"],
            [completion],
            answer=[gold],
            question=["q"],
            trajectory_ids=["t"],
            mode="train",
        )
        lo, hi = fn.bounds
        assert lo <= value <= hi, (name, completion, value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_extraction_never_raises(s):
    answers.extract_answer(s)
    answers.extract_answer(s, strict=True)
    answers.parse_number(s)


@pytest.mark.parametrize(
    ("completion", "gold", "ok"),
    [
        ("<reasoning>..</reasoning><answer>1,234</answer>", "1234", True),
        ("<answer>$18.00</answer>", "18", True),
        ("<answer>-5</answer>", "-5", True),
        ("<answer>50%</answer>", "50", True),
        ("<answer>3/4</answer>", "0.75", True),
        ("The answer is 42.", "42", True),
        ("\\boxed{7}", "7", True),
        ("#### 12", "12", True),
        ("<answer>12</answer> wait, 13", "12", True),  # the tagged answer wins over a later number
        ("<answer>17</answer>", "18", False),
        ("no numbers here", "0", False),
        ("<answer>-$5</answer>", "-5", True),
        ("<answer>−$5.50</answer>", "-5.5", True),
        ("<answer>12 000</answer>", "12000", True),
        ("<answer>1,23</answer>", "123", False),  # malformed grouping: two numbers, not one
        ("<answer>1,23</answer>", "1", False),
        ("<answer>\\frac{7}{2}</answer>", "3.5", True),
        ("<answer>3-1/2</answer>", "3.5", False),  # 3.5 or 3 - 1/2: read as two numbers
        ("<answer>7/8 maybe</answer>", "0.875", True),  # a fraction, not a hedge
        ("<answer>$7 (7 dollars)</answer>", "7", True),  # the same number twice is one answer
        ("<answer>5</answer><answer>4</answer>", "4", False),  # two answers that differ: a hedge
        ("<answer>4</answer><answer>4</answer>", "4", True),
        ("\\boxed{5} or \\boxed{4}", "4", False),
        ("The answer is 8. Check: 8 + 2 = 10.", "8", True),
        ("The answer is 5. No: the answer is 6.", "6", True),  # the last statement counts
        ("The answer is 7 or 8.", "7", False),
        ("#### 7-8", "8", False),
        ("It is either 7 or 8.", "8", False),
    ],
)
def test_is_correct_cases(completion, gold, ok):
    assert answers.is_correct(completion, gold) is ok


ISSUE_CASES = [  # issue 27 item 5: (what <answer> holds, gold, correct)
    ("from 10 to 16, so 16", "16", True),
    ("from 10 to 16, so 16", "10", False),
    ("7 or 8", "7", False),
    ("7 or 8", "8", False),
    ("between 7 and 8", "7", False),
    ("between 7 and 8", "8", False),
    ("1.5e3", "1500", True),
    ("1.5 × 10^3", "1500", True),
    ("3 1/2", "3.5", True),
    ("5 + 5 = 10", "10", True),
    ("12 apples", "12", True),
]


@pytest.mark.parametrize(("answer", "gold", "ok"), ISSUE_CASES)
def test_issue_cases_agree_in_the_checker_and_every_reward(answer, gold, ok):
    done = f"<reasoning>r</reasoning>\n<answer>{answer}</answer>"
    assert answers.is_correct(done, gold) is ok
    assert answers.is_correct(done, gold, strict=True) is ok
    assert answers.is_correct(f"So the answer is {answer}.", gold) is ok  # a fallback, same reading
    assert rewards.answer_match([""], [done], answer=[gold]) == [3.0 if ok else -1.0]
    assert rewards.strict_answer([""], [done], answer=[gold]) == [3.0 if ok else -1.0]
    assert rewards.number_match([""], [done], answer=[gold]) == [1.5 if ok else 0.0]


ANSWER_REWARDS = {
    name: fn for name, fn in rewards.REWARDS.items() if "answer" in inspect.signature(fn).parameters
}


@st.composite
def written_number(draw) -> tuple[Fraction, str]:
    """A number and one way a model may write it, which the policy reads as that number."""
    styles = ["int", "decimal", "money", "comma", "percent", "fraction", "mixed", "sci", "times"]
    style = draw(st.sampled_from(styles))
    n = draw(st.integers(-(10**6), 10**6))
    sign = "-" if n < 0 else ""
    if style == "decimal":
        return Fraction(n, 100), f"{sign}{abs(n) // 100}.{abs(n) % 100:02d}"
    if style == "money":
        return Fraction(n, 100), f"{sign}${abs(n) // 100:,}.{abs(n) % 100:02d}"
    if style == "comma":
        return Fraction(n), f"{n:,}"
    if style == "percent":
        return Fraction(n), f"{n}%"
    if style == "fraction":
        den = draw(st.integers(2, 12))
        return Fraction(n, den), f"{n}/{den}"
    if style == "mixed":
        den = draw(st.integers(2, 12))
        num = draw(st.integers(1, den - 1))
        return Fraction(n) + Fraction(num, den) * (-1 if n < 0 else 1), f"{n} {num}/{den}"
    if style in ("sci", "times"):
        m, k = draw(st.integers(1, 9)), draw(st.integers(1, 9))
        return Fraction(m * 10**k), f"{m}e{k}" if style == "sci" else f"{m} × 10^{k}"
    return Fraction(n), str(n)


# What may stand between the numbers of a list or hedge: anything but a conclusion marker ("=",
# "so", ...: they settle the answer), a bare space or "/" (which write one number: "12 000",
# "3 1/2", "7/8"), and a sentence or line end (which ends the statement a fallback reads).
CONNECTIVES = [
    *(", ", " or ", " and ", " to ", "-", "–", " - ", " — ", " or maybe ", ", or ", "; ", " | "),
    *(" vs ", " (or ", " apples or ", ", perhaps "),
    *("either {} or {}", "between {} and {}", "from {} to {}", "about {} or {}"),
]
SHAPES = {  # where the list stands in a completion: a template, and a template per number
    "tag": "<reasoning>r</reasoning>\n<answer>{}</answer>",
    "tags": "<reasoning>r</reasoning>\n<answer>{0}</answer>\n<answer>{1}</answer>",
    "open_tag": "<reasoning>r</reasoning>\n<answer>{}",
    "boxed": "So \\boxed{{{}}}.",
    "boxes": "\\boxed{{{0}}} or \\boxed{{{1}}}",
    "the_answer_is": "3 + 4 = 7.\nThe answer is {}.",
    "hashes": "3 + 4 = 7\n#### {}",
    "last_sentence": "3 + 4 = 7. It is {}.",
}


def listing(shape: str, connective: str, texts: list[str]) -> str:
    """A completion that lists ``texts`` in ``shape``, joined by ``connective``."""
    if "{1}" in SHAPES[shape]:  # one block per number (the first two)
        return SHAPES[shape].format(*texts)
    body = connective.format(*texts) if "{}" in connective else connective.join(texts)
    return SHAPES[shape].format(body)


@settings(max_examples=400, deadline=None)
@given(
    listed=st.lists(written_number(), min_size=2, max_size=4),
    data=st.data(),
    connective=st.sampled_from(CONNECTIVES),
    shape=st.sampled_from(sorted(SHAPES)),
)
def test_listing_several_numbers_never_pays(listed, data, connective, shape):
    """A hedge or list of different numbers that holds the gold answer, in any order and with any
    connective, is never correct, and earns from every reward that reads the answer no more than
    the same completion with one wrong number in its place (and less than with the gold one).
    The checker of before issue 27 fails it (it read the first number: ``7 or 8`` was 7)."""
    values = [float(v) for v, _ in listed]
    assume(all(not answers.numbers_equal(a, b) for i, a in enumerate(values) for b in values[:i]))
    texts = [t for _, t in listed]
    if "{}" in connective or "{1}" in SHAPES[shape]:  # two numbers, in either order
        texts = data.draw(st.permutations(texts[:2]))
    gold = repr(data.draw(st.sampled_from(values[: len(texts)])))  # exact: "0.3333333333333333"
    wrong = str(int(max(abs(v) for v in values)) * 3 + 1001)  # far from every listed number
    hedged = listing(shape, connective, texts)
    one_wrong = listing(shape, connective, [wrong] * len(texts))
    one_right = listing(shape, connective, [gold] * len(texts))

    assert not answers.is_correct(hedged, gold) and not answers.is_correct(
        hedged, gold, strict=True
    )
    assert answers.is_correct(one_right, gold) and not answers.is_correct(one_wrong, gold)
    assert {"answer_match", "number_match", "strict_answer"} <= set(ANSWER_REWARDS)
    hedged_total = right_total = 0.0
    for name, fn in ANSWER_REWARDS.items():
        (got,), (baseline,), (right,) = (
            fn([""], [c], answer=[gold]) for c in (hedged, one_wrong, one_right)
        )
        assert got <= baseline, (name, hedged, got, one_wrong, baseline)
        hedged_total, right_total = hedged_total + got, right_total + right
    assert hedged_total < right_total, (hedged, one_right)


def test_rewards_rank_good_over_bad():
    good = "<reasoning>3 + 4 = 7</reasoning>\n<answer>7</answer>"
    bad = "7 maybe"
    total = [
        sum(fn([""] * 2, [good, bad], answer=["7", "7"])[i] for fn in rewards.DEFAULT_REWARDS)
        for i in (0, 1)
    ]
    assert total[0] > total[1] + 5


@settings(max_examples=300, deadline=None)
@given(
    reply=st.one_of(
        st.text(max_size=80),
        st.none(),
        st.integers(),
        st.floats(allow_nan=True),
        st.binary(max_size=8),
    )
)
def test_any_judge_reply_parses_to_a_score_in_0_1(reply):
    score = judging.parse_score(reply)
    assert isinstance(score, float) and 0.0 <= score <= 1.0


@settings(max_examples=100, deadline=None)
@given(
    completions=st.lists(st.text(max_size=60), min_size=1, max_size=6),
    replies=st.lists(st.one_of(st.text(max_size=30), st.none(), st.integers()), max_size=8),
)
def test_judge_gives_a_finite_score_for_anything_and_grades_each_answer_once(completions, replies):
    calls = []

    def grade(questions, answers):  # a judge that replies garbage, too few or too many replies
        calls.append(len(answers))
        return replies

    judge = judging.Judge(grade, batch_size=4)
    scores = judge(["q"] * len(completions), completions, question=["q"] * len(completions))
    assert len(scores) == len(completions) and all(0.0 <= s <= 1.0 for s in scores)
    assert sum(calls) == len(set(completions))  # repeated completions are not graded again
    assert judge(["q"] * len(completions), completions) == scores and sum(calls) == len(
        set(completions)
    )


def test_a_judge_that_raises_costs_the_batch_its_reward_not_the_run():
    def broken(questions, answers):
        raise RuntimeError("out of memory")

    judge = judging.Judge(broken)
    assert judge(["q"], ["answer"]) == [0.0] and len(judge.seconds) == 1
