"""The no-learning control (``scripts/no_learning.py``, its figures in
``bench/results/no_learning.json``): each training notebook's smoke preset run as it is and with
every learning rate 0. The recorded figures are fed to the recipes' bars as they are now, so a bar
changed later is held to the same evidence: every learning bar must fail without training (else it
is a guard, or no check at all), and every bar must hold on the trained run."""

import json
import pathlib
import sys

import pytest

from tunixkit import evaluation, recipes

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import no_learning  # noqa: E402

RESULTS = json.loads(no_learning.RESULTS.read_text())["notebooks"]
KEYS = list(no_learning.NOTEBOOKS)


def _trained_runs(record: dict) -> list[tuple[str, dict]]:
    """(machine, run) of every trained run: the first, and its repeats on other kinds of machine
    (``scripts/no_learning.py --again``)."""
    again = record.get(no_learning.AGAIN, {})
    return [(record["trained"]["machine"], record["trained"]), *again.items()]


def _record(key: str) -> tuple[dict, type]:
    notebook, recipe_cls = no_learning.NOTEBOOKS[key]
    assert notebook in RESULTS, (
        f"no control recorded for {notebook}: python scripts/no_learning.py {key}"
    )
    return RESULTS[notebook], recipe_cls


def test_every_training_notebook_has_a_control():
    trains = {
        p.stem
        for p in (ROOT / "notebooks").glob("0*.py")
        if "learning_rate" in p.read_text() or "LEARNING_RATE" in p.read_text()
    }
    variants = {no_learning.name(k) for k in no_learning.VARIANTS}
    assert variants <= set(RESULTS), "python scripts/no_learning.py " + " ".join(
        no_learning.VARIANTS
    )
    assert trains == set(RESULTS) - variants == {nb for nb, _ in no_learning.NOTEBOOKS.values()}


@pytest.mark.parametrize("key", KEYS)
def test_the_untrained_run_really_trained_nothing(key):
    record, recipe_cls = _record(key)
    overrides = record["untrained"]["recipe_overrides"]
    assert overrides == no_learning.untrained_overrides(recipe_cls)
    assert overrides and set(overrides.values()) == {0.0}
    assert record["trained"]["recipe_overrides"] == {}


@pytest.mark.parametrize("key", KEYS)
def test_every_learning_bar_fails_without_training(key):
    record, recipe_cls = _record(key)
    untrained = record["untrained"]["figures"]
    learning = [b for b in recipe_cls.BARS if not b.guard]
    assert learning, f"{recipe_cls.__name__} has no learning bar"
    for bar in learning:
        assert not bar.met(untrained), f"passes without training: {bar.describe(untrained)}"
        with pytest.raises(AssertionError):  # the notebook's own call, enforced as in smoke
            evaluation.Checks(enforce=True).bars([bar], untrained)


@pytest.mark.parametrize("key", KEYS)
def test_every_bar_holds_on_the_trained_run(key):
    """On every kind of machine the trained run was recorded on."""
    record, recipe_cls = _record(key)
    for where, run in _trained_runs(record):
        trained = run["figures"]
        missed = [b.describe(trained) for b in recipe_cls.BARS if not b.met(trained)]
        assert not missed, (where, missed)
        assert run["notebook_exit"] == 0, where
        assert run["recipe_overrides"] == {}, where


@pytest.mark.parametrize("key", KEYS)
def test_every_learning_bar_sits_at_most_half_way_to_the_trained_figure(key):
    """A margin for noise and other machines: the bar asks for at most half of what training
    moved the figure (from the untrained run's figure; a stage the untrained run skipped counts
    from 0, no change), on every kind of machine the trained run was recorded on."""
    record, recipe_cls = _record(key)
    untrained = record["untrained"]["figures"]
    for where, run in _trained_runs(record):
        trained = run["figures"]
        for bar in (b for b in recipe_cls.BARS if not b.guard):
            t, u = trained[bar.figure], untrained.get(bar.figure, 0.0)
            moved = abs(t - u)
            room = t - bar.bar if bar.op.startswith(">") else bar.bar - t
            assert room >= 0.5 * moved, (
                f"{where}: {bar.describe(trained)}; untrained {u:.3f}: no margin"
            )


def test_the_trained_runs_were_repeated_on_a_second_kind_of_machine():
    """Issue 49's "both kinds of CI machine": every training notebook's trained run is recorded on
    at least two CPU models (the first record's, and a repeat with --again)."""
    for key in KEYS:
        record, _ = _record(key)
        again = record.get(no_learning.AGAIN, {})
        if key in no_learning.AWAITING_AGAIN:  # said in the script, with why; stale once repeated
            assert not again, f"{key} was repeated: drop it from no_learning.AWAITING_AGAIN"
            continue
        assert again, f"python scripts/no_learning.py --again {key} (on another kind of machine)"
        assert all(cpu not in record["trained"]["machine"] for cpu in again), (key, list(again))


def test_grpo_on_math_learns_what_it_is_rewarded_for_and_nothing_without_training():
    """02 with DATASET = "math" (the LaTeX reward, MATH-500's smoke copy, half of it word problems
    the warm start partly solves): the bars were measured on GSM8K and the notebook only reports
    them for MATH. Without training every learning bar fails; trained, the held-out reward rises
    past its bar with the margin the preset's bars keep, and greedy accuracy rises (the held-out
    sampled accuracy's +0.021 against its 0.02 bar has no margin: docs/tuning.md#no-learning)."""
    record = RESULTS[no_learning.name("02-math")]
    trained, untrained = record["trained"]["figures"], record["untrained"]["figures"]
    assert record["untrained"]["recipe_overrides"] == {"grpo.learning_rate": 0.0}
    for bar in (b for b in recipes.GRPO.BARS if not b.guard):
        assert not bar.met(untrained), bar.describe(untrained)
    reward = next(b for b in recipes.GRPO.BARS if b.figure == "heldout_reward_gain")
    moved = trained[reward.figure] - untrained[reward.figure]
    assert trained[reward.figure] - reward.bar >= 0.5 * moved, reward.describe(trained)
    assert trained["greedy_accuracy_change"] > untrained["greedy_accuracy_change"] == 0.0
    assert trained["format_after"] >= 0.9 > untrained["format_after"]


def test_the_docs_table_is_rendered_from_the_results():
    text = no_learning.DOCS.read_text()
    rendered = text.split(no_learning.BEGIN)[1].split(no_learning.END)[0].strip()
    assert rendered == no_learning.table().strip(), "run: python scripts/no_learning.py --write"


def test_distillation_ends_as_close_to_the_teacher_as_the_hard_loss_alone():
    """04's baseline: the same student, steps and data with the soft loss's weight 0 (alpha 0).
    A soft loss that drops or garbles the teacher's logits ends further from the teacher than it:
    tunix 0.1.7's own (KL over prompt and padding too) 1.9x its KL, temperature 2 1.35x
    (docs/tuning.md#04-distill-smoke). The smoke teacher is near-certain of every answer token, so
    distillation is not asked to beat the baseline by much: within 10%."""
    record, _ = _record("04")
    distilled, hard = record["trained"]["figures"], record["hard_loss_only"]["figures"]
    assert record["hard_loss_only"]["recipe_overrides"] == {"alpha": 0.0}
    assert distilled["student_kl_after"] <= 1.1 * hard["student_kl_after"], (distilled, hard)
