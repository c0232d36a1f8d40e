"""MATH-style benchmarks (MATH-500, MATH): LaTeX answers checked by math-verify, hedges wrong,
the data sets' real layouts read through one loader, and the profile's source of each."""

import dataclasses
import subprocess
import sys

import pytest

from tunixkit import answers, data, evaluation, recipes, rewards, runtime, testing

# (gold, the completion's answer, equivalent): the kinds of answer MATH has
CASES = [
    (r"\frac{1}{2}", "0.5", True),
    (r"\frac{1}{2}", r"\dfrac{1}{2}", True),
    (r"\frac{1}{2}", r"\frac{2}{4}", True),
    (r"\frac{1}{2}", r"\frac{1}{3}", False),
    (r"2\sqrt{3}", r"\sqrt{12}", True),
    (r"2\sqrt{3}", r"3\sqrt{2}", False),
    ("(1,2]", r"(1,2]", True),
    ("(1,2]", "(1,2)", False),
    (r"\{1,2\}", r"\{2,1\}", True),
    (r"\{1,2\}", r"\{1,3\}", False),
    (r"\text{Monday}", r"\text{Monday}", True),
    (r"\text{Monday}", r"\text{Tuesday}", False),
    ("(3,7)", "(3, 7)", True),
    ("10", "10.0", True),
    (r"5\text{ cm}", "5", True),
    ("1,2", "2, 1", True),  # all the solutions: a comma list is a set, not a hedge
    ("1,2", "1", False),
    (r"3-\sqrt{2}", r"3 - \sqrt{2}", True),  # an expression, not a range
    ("-1", "2-3", False),  # two numbers and a dash: a range, as GSM8K's 7-8 (not 2 minus 3)
]


@pytest.mark.parametrize("gold,said,same", CASES)
def test_latex_answers_are_equal_as_math_verify_decides(gold, said, same):
    for completion in (f"<reasoning>r</reasoning><answer>{said}</answer>", rf"so \boxed{{{said}}}"):
        assert answers.latex_correct(completion, gold) is same, completion


@pytest.mark.parametrize("gold", ["3", "4"])
def test_listing_several_answers_is_never_right(gold):
    """A hedge earns nothing, whichever candidate is right (math-verify alone takes one: it reads
    ``3 to 4`` as 3 and ``3 — 4`` as 4)."""
    hedges = [
        "<answer>3 or 4</answer>",
        r"<answer>\boxed{3}, \boxed{4}</answer>",
        "<answer>3</answer><answer>4</answer>",
        r"it is \boxed{3} or \boxed{4}",
        *(f"<answer>{a}</answer>" for a in ("3 to 4", "from 3 to 4", "between 3 and 4", "3-4")),
        *(f"<answer>{a}</answer>" for a in ("3 — 4", "4 | 3", r"3 \text{ and } 4", "4 vs 3")),
    ]
    for text in hedges:
        assert not answers.latex_correct(text, gold), text
        assert evaluation.categorize(text, gold, False, latex=True) in (
            "wrong_number",
            "broken_format",
        )
    assert answers.latex_correct(f"<answer>{gold}</answer>", gold)  # one answer: right


def test_strict_reads_the_answer_block_only_and_no_answer_is_said():
    assert not answers.latex_correct(r"so \boxed{5}", "5", strict=True)
    done = r"<reasoning>r</reasoning><answer>\frac{1}{2}</answer>"
    assert evaluation.categorize(done, r"\frac{1}{2}", False, latex=True) == "correct"
    assert evaluation.categorize("<reasoning>r</reasoning>", "5", False, latex=True) == "no_answer"
    assert answers.latex_answer("x" * 500 + r"\boxed{" + "1" * 500 + "}").text is None  # too long


def test_both_data_sets_load_from_their_real_layouts_and_bad_rows_are_named(tmp_path):
    math500 = data.load_math("math500", path=testing.write_math500(tmp_path / "m500", 14))
    assert len(math500) == 14 and {r["level"] for r in math500} == {1, 2, 3, 4, 5}
    assert all(answers.latex_correct(r["solution"], r["answer"]) for r in math500)
    # MATH: no answer column, the answer is the solution's last box; one folder per subject
    folder = testing.write_hendrycks_math(tmp_path / "math", 21)
    math = data.load_math("math", path=folder)
    assert len(math) == 21 and len({r["subject"] for r in math}) == 7
    assert all(r["answer"] and isinstance(r["level"], int) for r in math)
    one = sorted(folder.rglob("*.parquet"))[0]
    assert len(data.load_math("math", path=one)) == 3  # one file of the same columns
    rows = data.read_rows(one)
    data.write_jsonl(
        [*rows, dict(rows[0], solution="no box here")], tmp_path / "test_boxless.jsonl"
    )
    assert len(data.load_math("math", path=tmp_path / "test_boxless.jsonl")) == 3  # counted, said
    data.write_jsonl([{"problem": "p", "answer": "1"}], tmp_path / "bad" / "test.jsonl")
    with pytest.raises(data.DataError, match=r"test.jsonl: row 1 lacks \['solution', 'subject'"):
        data.load_math("math500", path=tmp_path / "bad")
    with pytest.raises(ValueError, match="unknown benchmark 'gsm'"):
        data.load_math("gsm")


def test_grpo_trains_on_math_train_split_and_evaluates_on_math500(tmp_path):
    """02's DATASET = "math": MATH's train split in the hub's layout (``<subject>/train-*``), never
    its test rows; MATH-500 to evaluate on; the LaTeX rewards and system prompt; MATH-500 has no
    train split to train on."""
    folder = testing.write_hendrycks_math(tmp_path / "math", 14, n_train=21)
    train = data.load_math("math", path=folder, split="train")
    test = data.load_math("math", path=folder)
    assert len(train) == 21 and len(test) == 14
    assert sorted(p.name for p in folder.rglob("*.parquet"))[0].startswith("test-")
    with pytest.raises(ValueError, match="MATH-500 has 'test' only"):
        data.load_math("math500", path=folder, split="train")
    full = runtime.resolve("full", verbose=False)
    m500 = testing.write_math500(tmp_path / "m500", 6)
    train, test = recipes.grpo_records(
        full, "math", data_dir=tmp_path, math_path=folder, math500_path=m500, limit=4
    )
    assert len(train) == 21 and len(test) == 4
    recipe = dataclasses.replace(recipes.GRPO.smoke(), dataset="math")
    assert recipe.latex and recipe.reward_fns() == rewards.LATEX_REWARDS
    assert "LaTeX" in recipe.eval_config().system_prompt
    assert recipes.GRPO.smoke().eval_config() == recipes.GRPO.smoke().eval  # GSM8K's as it was
    with pytest.raises(ValueError, match="dataset='mmlu'"):
        dataclasses.replace(recipe, dataset="mmlu").validate()


def test_the_profile_picks_the_source(tmp_path, monkeypatch):
    rt = runtime.resolve("smoke", verbose=False)
    smoke = recipes.math_benchmark(rt, "math", data_dir=tmp_path / "data", limit=5)
    assert len(smoke) == 5 and (tmp_path / "data" / "math").is_dir()  # written, then read
    full = dataclasses.replace(rt, profile="full")
    copy = testing.write_math500(tmp_path / "copy", 6)
    assert len(recipes.math_benchmark(full, "math500", data_dir=tmp_path, path=copy)) == 6
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(runtime.DownloadError, match="set MATH500_PATH"):
        recipes.math_benchmark(full, "math500", data_dir=tmp_path)


def test_latex_reward_in_tunix_reward_thread_and_listing_answers_earns_no_more():
    """GRPO's MATH reward: tunix calls rewards from a thread, where each check runs in a worker
    process; the rewards are the main thread's. Listing several answers earns what a wrong one
    does, whichever of them is right."""
    import threading

    gold = r"\frac{1}{2}"
    said = [
        r"<reasoning>r</reasoning><answer>\frac{1}{2}</answer>",
        r"<reasoning>r</reasoning><answer>\frac{1}{3}</answer>",
        r"<answer>\frac{1}{2} or 3</answer>",
        r"<answer>\frac{1}{3}</answer><answer>\frac{1}{2}</answer>",
        r"<answer>\boxed{3} \boxed{\frac{1}{2}}</answer>",
        r"<answer>0.5, 3</answer>",
        "no answer block",
    ]
    main = rewards.latex_answer_match(["q"] * len(said), said, answer=[gold] * len(said))
    assert main == [3.0, -1.0, -1.0, -1.0, -1.0, -1.0, 0.0]
    box: dict[str, list[float]] = {}
    worker = threading.Thread(
        target=lambda: box.update(
            r=rewards.latex_answer_match(["q"] * len(said), said, answer=[gold] * len(said))
        )
    )
    worker.start()
    worker.join()
    assert box["r"] == main


def test_a_check_that_outlasts_its_time_is_given_up_and_the_worker_replaced():
    import time

    assert answers.run_isolated(time.sleep, [(600,)], timeout=1.0) == [None]
    assert answers.run_isolated(abs, [(-3,), (4,)], timeout=60.0) == [3, 4]
    with pytest.raises(TypeError):  # the work's own error, raised in the caller
        answers.run_isolated(abs, [("x",)], timeout=60.0)


def test_the_worker_does_not_run_the_script_again(tmp_path):
    """A notebook run as a script (tests, papermill-free CI, `python nb.py`) calls the LaTeX reward
    from tunix's thread: its worker must not re-run the script, as a multiprocessing child that
    re-imports ``__main__`` would (it ran the whole notebook a second time)."""
    script = tmp_path / "nb.py"
    script.write_text(
        "import threading\n"
        "from tunixkit import rewards\n"
        "print('CELL RAN', flush=True)\n"
        "box = {}\n"
        "said = [r'<answer>\\frac{1}{2}</answer>', '<answer>0 to 1</answer>']\n"
        "t = threading.Thread(target=lambda: box.update(r=rewards.latex_answer_match(\n"
        "    ['q', 'q'], said, answer=[r'\\frac{1}{2}', '0'])))\n"
        "t.start(); t.join()\n"
        "print('REWARDS', box['r'], flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("CELL RAN") == 1, done.stdout
    assert "REWARDS [3.0, -1.0]" in done.stdout, done.stdout
