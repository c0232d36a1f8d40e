"""Rewards and answer checking: never raise on any string, bounded, and right on known cases."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunixkit import answers, judging, rewards  # judging registers its rubric rewards too

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
    ],
)
def test_is_correct_cases(completion, gold, ok):
    assert answers.is_correct(completion, gold) is ok


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
@given(completions=st.lists(st.text(max_size=60), min_size=1, max_size=6),
       replies=st.lists(st.one_of(st.text(max_size=30), st.none(), st.integers()), max_size=8))  # fmt: skip
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
