"""Notebook 06's pieces: traces in either shape, the smoke grader, stage bookkeeping, SimPO."""

import dataclasses
import json
import time

import numpy as np
import pytest

from tunixkit import (
    data,
    domains,
    judging,
    pipeline,
    preferences,
    prompting,
    runtime,
    session,
    testing,
)


def test_traces_load_from_chat_messages_or_prompt_response_and_other_shapes_are_refused(tmp_path):
    chat = tmp_path / "chat.jsonl"
    data.write_jsonl(
        [
            {
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "Hi?"},
                    {"role": "assistant", "content": "Hello."},
                ],
                "domain": "chat",
            },
            {"messages": [{"role": "user", "content": "Only a question"}]},
        ],
        chat,
    )
    assert domains.load_traces(str(chat)) == [
        {"domain": "chat", "prompt": "Hi?", "response": "Hello."}
    ]
    flat = tmp_path / "flat.csv"
    flat.write_text("question,reply\nWhat is 2+2?,4\n")
    rows = domains.load_traces(str(flat), fields=("question", "reply"), domain="math")
    assert rows == [{"domain": "math", "prompt": "What is 2+2?", "response": "4"}]
    other = tmp_path / "other.jsonl"
    data.write_jsonl([{"text": "a", "label": 1}], other)
    with pytest.raises(
        data.DataError,
        match=r"columns \['label', 'text'\]; expected a 'messages'.*\['prompt', 'response'\]",
    ):
        domains.load_traces(str(other))


def test_bad_trace_sources_are_named_with_what_was_expected(tmp_path, monkeypatch):
    empty = tmp_path / "empty.jsonl"  # rows, but not one of them a trace
    data.write_jsonl([{"messages": [{"role": "user", "content": "Hi?"}]}, {"messages": []}], empty)
    with pytest.raises(
        data.DataError, match=r"empty.jsonl: none of its 2 rows is a trace.*'messages'"
    ):
        domains.load_traces(str(empty))
    flat = tmp_path / "flat.csv"
    flat.write_text("prompt,response,kind\nWhat is 2+2?,4,math\n")
    with pytest.raises(
        data.DataError,
        match=r"flat.csv: no column 'category' .* columns are \['kind', 'prompt', 'response'\]",
    ):
        domains.load_traces(str(flat), domain_field="category")
    assert domains.load_traces(str(flat), domain_field="kind")[0]["domain"] == "math"

    import datasets

    def not_on_the_hub(path, *args, **kwargs):
        raise datasets.exceptions.DatasetNotFoundError(f"Dataset '{path}' doesn't exist on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", not_on_the_hub)
    with pytest.raises(
        runtime.DownloadError, match=r"no-such/traces from Hugging Face: not found .* Check the id"
    ):
        domains.load_traces("no-such/traces", limit=10)


def test_the_smoke_grader_prefers_the_reference_in_every_domain():
    tasks = testing.synthetic_tasks(60, seed=5)
    grade = testing.rubric_grader(tasks)
    good = [
        float(r.split()[-1]) for r in grade([t.prompt for t in tasks], [t.response for t in tasks])
    ]
    bad = [
        float(r.split()[-1])
        for r in grade(
            [t.prompt for t in tasks], ["<reasoning>hm</reasoning><answer>no</answer>"] * 60
        )
    ]
    for domain in domains.DOMAINS:
        idx = [i for i, t in enumerate(tasks) if t.domain == domain]
        assert min(good[i] for i in idx) >= 8 > max(bad[i] for i in idx) + 4, domain
    assert grade(["a prompt it never saw"], ["x"]) == ["no idea"]
    # the weak answers uneven() trains on earn the format point and nothing else, in every task
    weak = [t for t in testing.synthetic_tasks(600, seed=0) if t.domain in testing.WEAK]
    replies = testing.rubric_grader(weak)(
        [t.prompt for t in weak], [testing.WEAK[t.domain] for t in weak]
    )
    assert set(replies) == {"Score: 1"}
    rows = testing.uneven([t.record() for t in testing.synthetic_tasks(120, seed=0)], 0.3)
    for domain in domains.DOMAINS:
        kinds = [r["response"] == testing.WEAK.get(domain) for r in rows if r["domain"] == domain]
        assert sum(kinds) == (0 if domain == "math" else 14), domain  # 70% of 20


def test_stages_share_the_session_and_hand_over_exports(tmp_path):
    clock = session.Session(tmp_path, hours=1.0, started=time.time())
    stages = pipeline.Stages(tmp_path, {"a": 0.25, "b": 0.75}, clock, base_path="base")
    first = stages.clock("a")
    assert 0.2 < (first.deadline - time.time()) / (clock.remaining() - clock.reserve()) < 0.3
    assert stages.start_path("b") == "base" and not stages.done("a")
    stages.finish("a", tmp_path / "a" / "export" / "hf", steps=10)
    again = pipeline.Stages(tmp_path, {"a": 0.25, "b": 0.75}, clock)  # a rerun reads stages.json
    assert again.done("a") and again.start_path("b") == str(tmp_path / "a" / "export" / "hf")
    assert json.loads((tmp_path / "stages.json").read_text())["a"]["steps"] == 10
    # b's export supersedes a's once b is adopted, and a's is removed then (disk); b's own stays
    for stage in "ab":
        (tmp_path / stage / "export" / "hf").mkdir(parents=True)
        (tmp_path / stage / "export" / "hf" / "model.safetensors").write_bytes(b"x" * 1000)
    again.finish("b", tmp_path / "b" / "export" / "hf", steps=5)
    assert (tmp_path / "a" / "export").is_dir()  # not compared yet: the better one is kept then
    assert again.decide("b", None) and again.final() == "b"
    assert not (tmp_path / "a" / "export").exists() and (tmp_path / "b" / "export" / "hf").is_dir()
    late = session.StageClock(clock, deadline=time.time() - 1)
    assert late.must_stop(0.0) and not clock.must_stop(0.0)


def test_simpo_loss_prefers_the_answer_with_the_higher_mean_log_probability(tmp_path):
    import types

    import jax.numpy as jnp
    from tunix.sft.dpo import dpo_trainer

    from tunixkit import models, prompting

    lm = models.load_model("tiny-gemma3-sft", verbose=False)
    tok = lm.tokenizer
    prompt = [
        tok.bos_id(),
        *tok.encode(prompting.format_prompt("Tom has 2 pens and buys 3 more. How many pens?")),
    ]
    good = tok.encode(
        prompting.format_completion("Tom has 2 + 3 = 5 pens.", "5") + prompting.END_OF_TURN
    )
    bad = tok.encode("zq xv kk jw " * 4)
    n = max(len(good), len(bad))
    comp = np.array([good + [0] * (n - len(good)), bad + [0] * (n - len(bad))], np.int32)
    mask = (np.arange(n)[None] < np.array([[len(good)], [len(bad)]])).astype(np.int32)
    ids = jnp.asarray(np.concatenate([np.array([prompt] * 2, np.int32), comp], 1))
    full = jnp.concatenate([jnp.ones((2, len(prompt)), jnp.int32), jnp.asarray(mask)], 1)
    from tunix.rl import common

    ex = types.SimpleNamespace(
        input_ids=ids,
        positions=common.build_positions_from_mask(full),
        attention_mask=common.make_causal_attn_mask(full),
        logits_to_keep=n,
        completion_mask=jnp.asarray(mask),
    )
    chosen, rejected = dpo_trainer.compute_logps(
        lm.model, ex.input_ids, ex.positions, ex.attention_mask, n, ex.completion_mask
    )
    assert float(chosen[0]) / len(good) > float(rejected[0]) / len(
        bad
    )  # the warm start knows arithmetic, not noise
    loss, aux = preferences.simpo_loss_fn(lm.model, ex, beta=2.0, gamma=0.5)
    assert float(aux["rewards/accuracy"]) == 1.0 and float(loss) < float(np.log(2))
    # the recipe's simpo_gamma (06's SIMPO_GAMMA) is the margin asked for: a larger one, a larger loss
    wider, _ = preferences.simpo_loss_fn(lm.model, ex, beta=2.0, gamma=3.0)
    assert float(wider) > float(loss)
    import dataclasses

    from tunixkit import prompting, recipes

    recipe = recipes.Pipeline.smoke()
    assert recipe.simpo_gamma == 0.5 and recipe.algorithm == "simpo"
    # 06's stage and 03 build their trainers from their settings, config and optimizer included
    s = dataclasses.replace(
        pipeline.stage_settings(recipe, "preference"), beta=2.0, simpo_gamma=3.0
    )
    trainer = preferences.trainer(s, lm.model, None, output_dir=tmp_path)
    assert trainer.gen_model_input_fn(ex) == {"train_example": ex, "beta": 2.0, "gamma": 3.0}
    assert trainer.config.checkpoint_root_directory.startswith(str(tmp_path))
    # the algorithm asked for decides tunix's loss (06's stage once configured "dpo" for every
    # algorithm: ORPO trained DPO against no reference)
    orpo = preferences.trainer(dataclasses.replace(s, algorithm="orpo"), lm.model, lm.model)
    assert orpo.algorithm == "orpo" and orpo.ref_model is None
    dpo03 = recipes.DPO.smoke()  # 03's recipe is a preference run's settings too
    dpo = preferences.trainer(dpo03, lm.model, lm.model, output_dir=tmp_path / "03")
    assert dpo.algorithm == "dpo" and dpo.ref_model is lm.model
    assert dpo.config.lambda_orpo == dpo03.lambda_orpo and dpo.config.beta == dpo03.beta
    with pytest.raises(ValueError, match="DPO needs the reference model"):
        preferences.trainer(dpo03, lm.model, None)


def test_a_stage_waits_for_the_ones_before_and_its_data_is_made_once(tmp_path, capsys):
    clock = session.Session(tmp_path, hours=None, started=time.time())
    stages = pipeline.Stages(tmp_path, {"a": 0.5, "b": 0.5}, clock)
    assert stages.ready("a") and not stages.ready("b")
    assert "b: not started, a is not finished" in capsys.readouterr().out
    made = []
    build = lambda: made.append(1) or [{"prompt": "p", "completion": "c"}]  # noqa: E731
    first = stages.cached("a", "rows.jsonl", build)
    again = pipeline.Stages(tmp_path, {"a": 0.5, "b": 0.5}, clock).cached("a", "rows.jsonl", build)
    assert first == again == [{"prompt": "p", "completion": "c"}] and made == [1]
    stages.finish("a", tmp_path / "a" / "export" / "hf")
    assert stages.ready("b")


def test_a_stage_runs_once_and_the_session_publishes_its_best_model(tmp_path, capsys):
    """Stages.run decides once whether a stage runs: not before the stages ahead of it are done,
    not again once done (its export), never when skipped; Stages.publish says each stage's
    outcome and uploads the best model's Orbax export (here no KAGGLE_MODEL: it names it)."""
    clock = session.Session(tmp_path, hours=None, started=time.time())
    stages = pipeline.Stages(tmp_path, {"a": 0.3, "b": 0.3, "c": 0.4}, clock)
    built = []

    def build(name):
        built.append(name)
        stages.finish(name, tmp_path / name / "export" / "hf")
        return str(tmp_path / name / "export" / "hf")

    assert stages.run("b", lambda: build("b")) is None and built == []
    assert "b: not started, a is not finished" in capsys.readouterr().out
    assert stages.run("a", lambda: build("a")) == str(tmp_path / "a" / "export" / "hf")
    assert stages.run("a", lambda: build("a")) == str(tmp_path / "a" / "export" / "hf")
    assert built == ["a"]  # done: its export, not run again
    stages.skip("b", "no pair")
    assert stages.run("b", lambda: build("b")) is None and built == ["a"]
    assert stages.publish(None, "test") is None  # a's export was never written
    out = capsys.readouterr().out
    assert "a: not compared\nb: no pair\nthe final model: a;" in out
    assert "no stage finished" in out
    (tmp_path / "a" / "export" / "orbax").mkdir(parents=True)
    assert stages.publish(None, "test") is None
    assert f"to publish {tmp_path / 'a' / 'export' / 'orbax'}" in capsys.readouterr().out


def test_a_stage_with_nothing_to_train_on_is_skipped_and_the_session_goes_on(tmp_path, capsys):
    """06's self-improvement can keep no answer and its pair pass can find no pair (a weak judge,
    answers all cut by the limit): the stage is skipped, said and kept in stages.json, nothing is
    removed, and the next stage starts from the model this one would have started from."""
    clock = session.Session(tmp_path, hours=None, started=time.time())
    shares = {"a": 0.3, "b": 0.3, "c": 0.4}
    stages = pipeline.Stages(tmp_path, shares, clock, base_path="base")
    assert stages.cached("a", "rows.jsonl", lambda: []) == []
    assert not (tmp_path / "a" / "rows.jsonl").exists()  # a rerun asks again
    stages.skip("a", "no sampled answer was kept")
    assert "a: skipped, no sampled answer was kept; the next stage starts from base" in (
        capsys.readouterr().out
    )
    stages.finish("b", tmp_path / "b" / "export" / "hf", steps=7)
    (tmp_path / "b" / "export" / "hf").mkdir(parents=True)
    stages.skip("c", "the judge told no prompt's answers apart")
    assert (tmp_path / "b" / "export" / "hf").is_dir()  # the next stage's start stays
    again = pipeline.Stages(tmp_path, shares, clock)  # a rerun reads stages.json
    assert [again.done(n) for n in shares] == [True, True, True]
    assert again.skipped("a") == "no sampled answer was kept" and again.skipped("b") is None
    assert again.start_path("c") == str(tmp_path / "b" / "export" / "hf")
    assert again.state["c"]["export"] == str(tmp_path / "b" / "export" / "hf")
    assert again.steps() == 7
    assert again.to_do() == [] and stages.to_do() == []
    assert again.final() == "b"  # c was skipped: b's export is the final model
    assert pipeline.Stages(tmp_path / "new", shares, clock).to_do() == ["a", "b", "c"]


def test_a_rehearsal_times_the_passes_stages_even_when_nothing_passes(capsys):
    """Random weights (a device rehearsal) pass no judge: the real run skips the stage, but a
    rehearsal times it at its real shapes on what was sampled (and says so)."""
    from types import SimpleNamespace

    from tunixkit import evaluation, families

    tasks = testing.synthetic_tasks(6, seed=1)
    records = [t.record() for t in tasks]

    def generate(loaded, prompts, config, progress=False, logprobs=False, sampler=None):
        return [evaluation.Generation("<x1><x2>", 32, True) for _ in prompts]  # cut at the limit

    loaded = SimpleNamespace(chat=families.GEMMA_CHAT)
    judge = judging.Judge(lambda prompts, completions, **kw: ["Score: 5"] * len(prompts), name="j")
    config = evaluation.EvalConfig(temperature=0.7, top_p=1.0, batch_size=8)
    rehearsing, running = testing.ScriptedClock(rehearsal=object()), testing.ScriptedClock()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evaluation, "generate", generate)
        mp.setattr(evaluation, "make_sampler", lambda loaded, size: None)  # generate is fake
        kept, report = pipeline.self_improve(loaded, records, judge, config, clock=running)
        pairs = pipeline.judged_pairs(loaded, records, judge, config, clock=running)
        assert kept == [] and pairs == [] and report["kept"] == 0
        assert "timed on what was sampled" not in capsys.readouterr().out
        kept, report = pipeline.self_improve(loaded, records, judge, config, clock=rehearsing)
        pairs = pipeline.judged_pairs(loaded, records, judge, config, clock=rehearsing)
    said = capsys.readouterr().out
    assert "each prompt's best answer" in said and "each prompt's best and worst answer" in said
    assert report["kept"] == 0  # the report still says what the real run would keep
    assert len(kept) == len(pairs) == 6
    assert {c for _, c in kept} == {"<x1><x2>"}  # cut answers get no end of turn


def test_grpo_keeps_the_prompts_the_judge_told_apart(tmp_path, capsys):
    records = [
        {"prompt": p, "answer": ""}
        for p in ("Give three ideas.", "Write a poem.", "Give three ideas.")
    ]
    pairs = tmp_path / "pairs.jsonl"
    data.write_jsonl(
        [
            {
                "prompt": prompting.format_prompt("Give three ideas.", "sys"),
                "chosen": "a",
                "rejected": "b",
            }
        ],
        pairs,
    )
    every = [{"question": r["prompt"], "answer": "", "domain": "general"} for r in records]
    assert pipeline.contested(records, pairs, "sys") == [every[0], every[2]]
    assert "2 of 3" in capsys.readouterr().out
    # no preference stage
    assert pipeline.contested(records, tmp_path / "missing.jsonl", "sys") == every
    # none matched: said, not dropped
    assert pipeline.contested(records, pairs, "another system prompt") == every
    assert "none of 3" in capsys.readouterr().out


def test_a_judge_model_scores_by_the_probabilities_of_its_score_digits(monkeypatch):
    """llm_grader's own path (Judge turns its exceptions into zeros, so it is called directly): the
    judge model reads the rubric prompt in its family's chat template, its reply begun with
    "Score: ", and the score is the mean digit under its next-token probabilities, as tunix's own
    forward pass of each prompt alone gives them."""
    import jax
    import numpy as np
    from tunix.rl import common

    from tunixkit import evaluation, models

    judge_model = models.load_model("tiny-gemma3-sft", verbose=False)
    asked, real = [], evaluation.ChoiceScorer.__call__
    monkeypatch.setattr(
        evaluation.ChoiceScorer,
        "__call__",
        lambda self, prompts: asked.extend(prompts) or real(self, prompts),
    )
    questions = ["Give three ideas for a picnic.", "What does a plant need to grow?"]
    answers = [
        "<reasoning>r</reasoning>\n<answer>1. pack fruit.</answer>",
        "<answer>light</answer>",
    ]
    grade = judging.llm_grader(judge_model, max_prompt_length=512, batch_size=2)
    scores = grade(questions, answers)
    rubric = judging.JudgeRubric()
    assert asked == [
        judge_model.chat.prompt(rubric(q, c)) + "Score: "
        for q, c in zip(questions, answers, strict=True)
    ]
    assert asked[0].startswith("<start_of_turn>user\n") and "1. pack fruit." in asked[0]
    tok, model = judge_model.tokenizer, judge_model.model
    digits = [tok.encode(asked[0] + d)[-1] for d in "0123456789"]
    expected, mass = [], 0.0
    for prompt in asked:  # each prompt alone, unpadded, through tunix's forward
        ids = jax.numpy.asarray([[tok.bos_id(), *tok.encode(prompt)]])
        mask = ids > -1
        logits, _ = model(
            ids,
            common.build_positions_from_mask(mask),
            None,
            model.get_attention_mask(ids, inputs_mask=mask),
        )
        probs = np.exp(np.asarray(jax.nn.log_softmax(logits[0, -1]))[digits])
        expected.append(judging.expected_score(probs))
        mass += probs.sum()
    assert np.allclose(scores, expected, atol=1e-5), (scores, expected)
    assert all(0.0 <= x <= 1.0 for x in scores) and scores[0] != scores[1]
    assert grade.mass == pytest.approx(mass, abs=1e-5) and grade.judged == 2
    # through the Judge the notebooks use, the same scores (its NumPy float32s once became 0.0:
    # every judged score, reward and pair of a full run was 0; the real 270M's 06 run found it)
    assert judging.Judge(grade).scores(questions, answers) == pytest.approx(scores, abs=1e-6)


def test_the_judge_reads_a_whole_response_at_the_generation_limit(monkeypatch, capsys):
    """A response of 768 tokens (the full profile's generation limit) reaches the judge whole, tags
    and reasoning included, with llm_grader's default lengths; a question too long to fit beside it
    loses its middle (counted and printed), never the response's end."""
    from tunixkit import evaluation, models, recipes

    judge_model = models.load_model("tiny-gemma3-sft", verbose=False)
    asked = []

    def fake_scores(self, prompts):
        asked.extend((p, self.max_prompt_length) for p in prompts)
        return np.eye(10)[[7] * len(prompts)]  # every judge's probability on "7"

    monkeypatch.setattr(evaluation.ChoiceScorer, "__call__", fake_scores)
    tokens = lambda s: len(judge_model.tokenizer.encode(s))  # noqa: E731
    limit = recipes.Pipeline.full().grpo.max_generation_steps
    body = " ".join(f"point {i} holds." for i in range(2000))
    words = body.split()
    while tokens(" ".join(words)) > limit - 30:
        words = words[: int(len(words) * 0.99)]
    response = f"<reasoning>{' '.join(words)}</reasoning>\n<answer>THE END OF THE ANSWER</answer>"
    assert limit - 60 <= tokens(response) <= limit
    short_q = "Summarize the text above."
    long_q = "BEGIN " + " ".join(f"line {i} of the document." for i in range(800)) + " END"
    grade = judging.llm_grader(judge_model)
    assert grade([short_q], [response]) == [pytest.approx(7 / 9)]
    prompt, length = asked[-1]
    assert response in prompt and short_q in prompt and grade.cut == 0
    assert tokens(prompt) + 1 <= length
    grade([long_q], [response])
    prompt, length = asked[-1]
    assert response in prompt and "BEGIN" in prompt and "END\n" in prompt and "[...]" in prompt
    assert (
        tokens(prompt) + 1 <= length
        and prompt.endswith("Score: ")
        and grade.cut == 1
        and grade.judged == 2
    )
    assert "1 of 1 prompts over" in capsys.readouterr().out
    assert judging.Judge(grade).prompts_cut == 1


def test_held_out_prompts_are_distinct_and_never_trained_on():
    records = [t.record() for t in testing.synthetic_tasks(1200, seed=0)]
    held, train = domains.split_heldout(records, 20)
    by_domain = {d: [r["prompt"] for r in held if r["domain"] == d] for d in domains.DOMAINS}
    assert all(len(p) == len(set(p)) == 20 for p in by_domain.values()), by_domain
    assert not {r["prompt"] for r in held} & {r["prompt"] for r in train}
    for domain in domains.DOMAINS:  # every domain keeps prompts of its own to train on
        assert len({r["prompt"] for r in train if r["domain"] == domain}) >= 20, domain


def test_evaluations_judge_greedy_and_sampled_answers_and_stages_compare_paired(
    tmp_path, monkeypatch
):
    """The bookkeeping of domains.evaluate with samples, paired_change and the changes table, with
    generation faked: greedy answers are the reference before and after; of each prompt's sampled
    answers, one of two is the reference before and both are after."""
    from types import SimpleNamespace

    from tunixkit import evaluation, families

    tasks = testing.synthetic_tasks(24, seed=3)
    records = [t.record() for t in tasks]
    reference = {t.prompt: t.response for t in tasks}
    stage = {"name": "before"}

    def generate(loaded, prompts, config, progress=False, logprobs=False, sampler=None):
        out = []
        for i, p in enumerate(prompts):
            question = next(q for q in reference if q in p)
            weak = config.temperature and stage["name"] == "before" and i % 2
            text = "<reasoning>x</reasoning><answer>no</answer>" if weak else reference[question]
            out.append(evaluation.Generation(text, 10, False))
        return out

    monkeypatch.setattr(evaluation, "generate", generate)
    loaded = SimpleNamespace(chat=families.GEMMA_CHAT)
    judge = judging.Judge(testing.rubric_grader(tasks), name="judge")
    config = evaluation.EvalConfig.smoke()
    sampling = evaluation.EvalConfig(temperature=0.7, top_p=1.0)
    with pytest.raises(ValueError, match="temperature"):
        domains.evaluate(loaded, records, judge, name="x", config=config, samples=2)
    results = {}
    for name in ("before", "after"):
        stage["name"] = name
        results[name] = domains.evaluate(
            loaded,
            records,
            judge,
            name=name,
            config=config,
            output_dir=tmp_path,
            samples=2,
            sampling=sampling,
        )
    before, after = results["before"].rows["all"], results["after"].rows["all"]
    assert before["judged"] == after["judged"] == after["sampled"] > 0.9
    assert before["sampled"] < 0.6 and before["prompts"] == len(reference)
    changes = domains.stage_changes(tmp_path, ["before", "after"])["before->after"]
    assert changes["judged"]["all"][:2] == (0.0, 0.0)
    gain, ci, n = changes["sampled"]["all"]
    assert gain == pytest.approx(after["sampled"] - before["sampled"]) and 0 < ci < gain
    assert n == len(reference)
    table = domains.changes_table({"before->after": changes})
    assert f"| all | +0.00 (±0.00) / +{gain:.2f} (±{ci:.2f}) |" in table
    assert "sampled" in domains.table(list(results.values()))
    assert before["tokens_p50"] == before["tokens_p90"] == 10 and before["truncated"] == 0
    assert "| all | 10 / 10 | 0% | 10 / 10 | 0% |" in domains.length_table(list(results.values()))
    assert "no stage to compare" in domains.changes_table(
        domains.stage_changes(tmp_path, ["before"])
    )


def test_a_full_preset_grpo_stage_trains_on_every_domain(tmp_path, capsys):
    """The full profile's data order (traces of five domains, then GSM8K math after them): the pair
    prompts are balanced by domain, so the prompts GRPO keeps, and its batches, hold every domain,
    math with its answer for the checker and the others with none (the judge rewards them)."""
    from tunixkit import prompting, recipes

    recipe = recipes.Pipeline.full()
    traces = [
        {"domain": d, "prompt": f"{d} prompt {i}", "response": "r"}
        for i in range(400)
        for d in ("creative", "ideation", "summarization", "science", "code")
    ]
    gsm = [{"question": f"math {i}?", "solution": "s", "answer": str(i)} for i in range(3000)]
    _, train = domains.split_heldout(traces + domains.math_tasks(gsm), recipe.heldout_per_domain)
    pair_tasks = domains.balanced(train, recipe.pair_prompts)
    counts = domains.by_domain(pair_tasks)
    assert len(counts) == 6 and max(counts.values()) - min(counts.values()) <= 1, counts
    pairs = tmp_path / "pairs.jsonl"  # the judge told apart the samples of every other prompt
    told_apart = [
        {"prompt": prompting.format_prompt(t["prompt"], "sys"), "chosen": "a", "rejected": "b"}
        for t in pair_tasks[::2]
    ]
    data.write_jsonl(told_apart, pairs)
    rows = pipeline.contested(train, pairs, "sys")
    assert "GRPO prompts by domain" in capsys.readouterr().out
    assert set(domains.by_domain(rows)) == set(domains.DOMAINS)
    assert all(bool(r["answer"]) == (r["domain"] == "math") for r in rows)
    batches = data.grpo_dataset(
        rows, batch_size=recipe.grpo.batch_size, num_batches=100, system_prompt="sys"
    )
    seen = {q for b in batches for q in b["question"]}
    by_question = {r["question"]: r["domain"] for r in rows}
    assert {by_question[q] for q in seen} == set(domains.DOMAINS)


def test_full_prompts_fit_the_data_and_cut_prompts_are_counted(capsys, tmp_path):
    """The full profile's prompt lengths hold a summarization prompt with its document (1,024
    tokens, the system prompt included) in the evaluations, the passes and GRPO; a prompt still
    longer is printed and counted by where it was cut in the session it was cut in (for
    summary.json): a stage's directly, a pass's in the timed block it ran in."""
    from tunixkit import evaluation, recipes, session

    recipe = recipes.Pipeline.full()
    limit = recipe.grpo.max_prompt_length
    assert recipe.eval.max_prompt_length >= 1024 and limit >= 1024
    clock, other = (session.Session(tmp_path / name, None, time.time()) for name in "ab")
    assert evaluation.count_cut("grpo", [100, 2000, 1024, 1025], limit, clock=clock) == 2
    assert "grpo: 2/4 prompts exceed max_prompt_length=1024" in capsys.readouterr().out
    with clock.timed("evaluation"):
        with clock.timed("judged pairs"):  # a nested block is counted once
            evaluation.count_cut("generate", [2000, 10], limit)
        evaluation.count_cut("generate", [10], limit)
    evaluation.count_cut("generate", [2000], limit)  # outside any block: printed, kept nowhere
    with other.timed("evaluation"):  # another session's block
        evaluation.count_cut("generate", [2000], limit)
    assert clock.prompts_cut == {"grpo": 2, "grpo_seen": 4, "generate": 1, "generate_seen": 3}
    assert other.prompts_cut == {"generate": 1, "generate_seen": 1}


def test_the_judge_grades_each_domain_by_its_own_criteria():
    rubric = judging.JudgeRubric(domain_of={"Summarize this.": "summarization", "Add 2+2.": "math"})
    summary, sums, other = (
        rubric(q, "<answer>x</answer>") for q in ("Summarize this.", "Add 2+2.", "Hi?")
    )
    assert "summarization task" in summary and "nothing invented" in summary
    assert "math task" in sums and "final answer is correct" in sums
    assert "general task" in other and "<answer>x</answer>" in other
    assert len({summary, sums, other}) == 3


def test_full_grpo_penalizes_answers_that_hit_the_generation_limit():
    """The full profile's GRPO rewards shape the length: a response left open at the 768-token limit
    (~3,200 characters) scores -1, a long closed one less than a short one, which costs nothing."""
    from tunixkit import recipes

    recipe = recipes.Pipeline.full()
    fns = {f.__name__: f for f in pipeline.weighted_rewards(recipe.reward_weights, judge=None)}
    shaping = fns["length_target"]
    short = "<reasoning>r</reasoning>\n<answer>a short answer</answer>"
    long_closed = "<reasoning>" + "word " * 580 + "</reasoning>\n<answer>a</answer>"
    cut_off = "<reasoning>" + "word " * 600 + "</reasoning>\n<answer>and then"
    assert shaping(["q"] * 3, [short, long_closed, cut_off]) == [
        0.0,
        pytest.approx(-0.66, abs=0.05),
        -1.0,
    ]


def test_judge_calls_compile_once_however_many_there_are():
    """The judge keeps one compiled scoring pass: after its first call (the compiles), further calls
    of the same batch shape compile nothing, as GRPO steps and evaluations call it again and
    again."""
    import jax

    from tunixkit import models

    judge_model = models.load_model("tiny-gemma3-sft", verbose=False)
    grade = judging.llm_grader(judge_model, max_prompt_length=256, batch_size=2)
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **kw: compiles.append(event) if "backend_compile" in event else None
    )
    grade(["What is 2+2?", "Name a colour."], ["<answer>4</answer>", "<answer>red</answer>"])
    first = len(compiles)
    assert first > 0, "the first call compiled nothing: the counter counts nothing"
    for i in range(3):
        grade(
            [f"What is {i}+1?", "Name a fruit."],
            [f"<answer>{i + 1}</answer>", "<answer>fig</answer>"],
        )
    assert len(compiles) == first, f"{len(compiles) - first} compiles in 3 more judge calls"
    assert grade.judged == 8


def test_a_pass_compiles_once_however_many_chunks_it_has():
    """06's self-improvement and pair passes sample chunk by chunk (the clock is asked between
    them): one sampler serves every chunk, so the chunks after the first compile nothing."""
    import jax

    from tunixkit import evaluation, models

    loaded = models.load_model("tiny-gemma3-sft", verbose=False)
    config = evaluation.EvalConfig(
        max_prompt_length=64, max_generation_steps=4, batch_size=2, system_prompt=None
    )
    tasks = [{"prompt": f"What is {i}+1?"} for i in range(8)]  # 2 prompts a chunk: 4 chunks
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **kw: compiles.append(event) if "backend_compile" in event else None
    )
    judge = judging.Judge(lambda qs, cs: ["Score: 5"] * len(qs))

    def compiled(n):  # the compiles of a pass over n tasks
        before = len(compiles)
        prompts, groups = pipeline.sample_and_judge(loaded, tasks[:n], judge, config, samples=4)
        assert len(prompts) == len(groups) == n and {len(g) for g in groups} == {4}
        return len(compiles) - before

    assert compiled(2) > 0, "the first pass compiled nothing: the counter counts nothing"
    one_chunk = compiled(2)  # a new sampler's own compiles
    assert compiled(8) == one_chunk, "the chunks after the first compiled again"


def test_a_pass_stops_when_its_clock_says_and_keeps_what_it_made(tmp_path, monkeypatch, capsys):
    """The self-improvement and pair passes run in chunks; a clock that says stop (here after the
    second chunk: by event, not by time) ends the pass there, and the tasks done are kept."""
    from types import SimpleNamespace

    from tunixkit import evaluation, families

    tasks = testing.synthetic_tasks(40, seed=1)
    records = [t.record() for t in tasks]
    reference = {t.prompt: t.response for t in tasks}
    made = []

    def generate(loaded, prompts, config, progress=False, logprobs=False, sampler=None):
        made.extend(prompts)
        weak = "<reasoning>x</reasoning><answer>no</answer>"
        return [
            evaluation.Generation(
                weak if i % 2 else reference[next(q for q in reference if q in p)], 10, False
            )
            for i, p in enumerate(prompts)
        ]

    monkeypatch.setattr(evaluation, "generate", generate)
    monkeypatch.setattr(evaluation, "make_sampler", lambda loaded, size: None)  # generate is fake
    loaded = SimpleNamespace(chat=families.GEMMA_CHAT)
    judge = judging.Judge(testing.rubric_grader(tasks), name="judge")
    config = evaluation.EvalConfig(temperature=0.7, top_p=1.0, batch_size=8)  # chunks of 8 prompts
    pairs = pipeline.judged_pairs(
        loaded, records, judge, config, samples=4, clock=testing.ScriptedClock(stop_at=2)
    )
    assert "judged pairs: the session clock stopped the pass after 16 of 40 prompts" in (
        capsys.readouterr().out
    )
    # every one of the 16 prompts has a reference and a weak answer: a pair each
    assert len(made) == 16 * 4 and len(pairs) == 16
    kept, report = pipeline.self_improve(
        loaded, records, judge, config, samples=4, clock=testing.ScriptedClock(stop_at=2)
    )
    assert report["prompts"] == 16 and report["prompts_planned"] == 40 and report["samples"] == 64
    assert "self-improvement: the session clock stopped" in capsys.readouterr().out
    made.clear()
    pipeline.judged_pairs(loaded, records, judge, config, samples=4)  # no clock: every prompt
    assert len(made) == 40 * 4
    # a pass's clock is part of its stage's share of the session
    clock = session.Session(tmp_path, hours=1.0, started=time.time())
    stages = pipeline.Stages(tmp_path, {"a": 0.5, "b": 0.5}, clock)
    whole, half = stages.clock("a").deadline, stages.clock("a", part=0.5).deadline
    left = clock.remaining() - clock.reserve()
    assert whole - half == pytest.approx(left / 4, rel=0.01)


def test_the_judge_is_calibrated_per_domain_before_training_relies_on_it():
    """The smoke judge (rubric rules) tells a reference from another prompt's answer in every domain
    but code (another function also has def and return), and misses absent tags in code (its
    content points already reach the cap): calibration names exactly those."""
    tasks = testing.synthetic_tasks(60, seed=3)
    records = [t.record() for t in tasks][:24]
    judge = judging.Judge(testing.rubric_grader(tasks), name="judge")
    found = domains.calibrate(judge, records)
    rows = found["rows"]
    assert set(rows) == {r["domain"] for r in records} | {"all"} and rows["all"]["n"] == 24
    assert all(r["reference"] == 1.0 for r in rows.values())
    assert rows["math"]["untagged"] == 0.0 and rows["creative"]["other_prompt"] < 0.5
    assert [w.split(":")[0] for w in found["warnings"]] == ["code", "code"]
    table = domains.calibration_table(found)
    assert "| math | 4 | 1.00 |" in table and "does not tell these apart" in table
    garbage = judging.Judge(lambda q, c: ["no idea"] * len(q), name="garbage")
    blind = domains.calibrate(garbage, records)  # a judge that says nothing is named everywhere
    assert len(blind["warnings"]) == 2 * len(set(r["domain"] for r in records))


def _judged(path, scores):
    """A stage's held-out evaluation as domains.evaluate writes it: one judged score per prompt."""
    path.write_text(
        "".join(
            json.dumps({"domain": "creative", "prompt": f"p{i}", "judged": x}) + "\n"
            for i, x in enumerate(scores)
        )
    )


def test_a_stage_that_makes_the_model_worse_is_not_adopted_and_the_start_model_can_win(
    tmp_path, capsys
):
    """Each finished stage is compared with the model it started from, paired prompt by prompt:
    one whose judged score fell (the whole 95% interval below 0) is not adopted. The judged copy
    goes back to the better model (here the start model, exported for it), the next stage starts
    from that model and is compared with it, and stages.json keeps each decision and its reason."""
    from tunixkit import checkpoints, models, recipes

    recipe = dataclasses.replace(recipes.Pipeline.smoke(), model_id="tiny-gemma3")
    clock = session.Session(tmp_path, hours=None, started=time.time())
    shares = {"sft": 0.5, "grpo": 0.5}
    stages = pipeline.Stages(tmp_path, shares, clock)
    start = models.load_model("tiny-gemma3", verbose=False)
    start_logits = testing.logits(start.model)
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.7, 40)
    _judged(tmp_path / "domains_start.jsonl", base)

    def finished(name, seed, scores):  # what train_stage leaves: the export, the judged copy
        trained = models.load_model("tiny-gemma3", verbose=False)
        testing.randomize_all(trained.model, seed=seed)
        exports = models.export(trained.model, trained, tmp_path / name / "export")
        stages.finish(name, exports["hf"], steps=4, stopped="done")
        checkpoints.write_judged(exports["orbax"], tmp_path, stages.steps())
        _judged(tmp_path / f"domains_{name}.jsonl", scores)
        return trained

    finished("sft", 1, base - 0.2 + rng.normal(0, 0.02, 40))  # worse on every prompt
    assert not pipeline.adopt(stages, "sft", recipe)
    out = capsys.readouterr().out
    assert "sft: NOT adopted: judged score -0.1" in out and "start stays the best model" in out
    figures = stages.state["sft"]["adoption"]
    assert figures["change"] + figures["ci"] < 0 and figures["prompts"] == 40
    assert stages.final() is None and stages.start_path("grpo") is None
    assert not (tmp_path / "sft" / "export").exists()  # the loser's export is removed
    judged = tmp_path / "ckpts" / "actor" / "4" / "model_params"  # the start model's, again
    assert _files(judged) == _files(tmp_path / "start" / "export" / "orbax" / "params")
    exported = models.load_model("tiny-gemma3", path=tmp_path / "start" / "export" / "hf")
    np.testing.assert_allclose(testing.logits(exported.model), start_logits, atol=1e-5)

    finished("grpo", 2, base + 0.05 + rng.normal(0, 0.02, 40))  # better than the start
    assert pipeline.adopt(stages, "grpo", recipe)
    assert "grpo: adopted: judged score +0.0" in capsys.readouterr().out
    assert stages.state["grpo"]["adoption"]["against"] == "start"  # its own start, not sft
    assert stages.final() == "grpo" and not (tmp_path / "start" / "export").exists()
    judged = tmp_path / "ckpts" / "actor" / "8" / "model_params"
    assert _files(judged) == _files(tmp_path / "grpo" / "export" / "orbax" / "params")
    again = pipeline.Stages(tmp_path, shares, clock)  # a rerun reads the decisions back
    assert [again.state[n]["adopted"] for n in shares] == [False, True]
    assert not pipeline.adopt(again, "sft", recipe) and again.summary() == (
        "sft: done, not adopted; grpo: done, adopted"
    )


def _files(folder):
    """Every file under ``folder`` and its bytes, by relative path."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


class _RunsOutAtStep(session.Session):
    """A session whose time runs out once training has done ``at`` steps: an event, not a time.
    Training asks :meth:`stop_requested` with the steps done before every step."""

    at = 3
    seen = 0

    def stop_requested(self, steps):
        self.seen = steps
        return False

    def remaining(self):
        return 0.0 if self.seen >= self.at else 3600.0


def test_a_last_stage_the_session_clock_stops_is_finished_and_judged(tmp_path, capsys):
    """The last stage's deadline is the session's end: the clock stops its training part-way, and
    the checkpoint and export then spend the reserve. The stage is still finished (done, exported,
    the judged model), with the steps it trained and why it stopped, and no later stage starts in
    this session (the time left is the final evaluation's)."""
    from tunixkit import recipes

    recipe = dataclasses.replace(
        recipes.Pipeline.smoke(), model_id="tiny-gemma3", batch_size=2, max_len=32
    )
    clock = _RunsOutAtStep(tmp_path, hours=1.0, started=time.time())
    stages = pipeline.Stages(tmp_path, {"sft": 1.0, "next": 0.0}, clock)
    stage_clock = stages.clock("sft")
    assert abs(stage_clock.deadline - (clock.started + 3600 - clock.reserve())) < 5
    pairs = [
        (f"<start_of_turn>user\n{i}+1<end_of_turn>\n", f"{i + 1}<end_of_turn>") for i in range(8)
    ]
    export = pipeline.sft_stage(stages, "sft", pairs, recipe, steps=20)
    out = capsys.readouterr().out
    assert export and stages.done("sft"), out
    assert stages.state["sft"]["stopped"] == "session clock" and stages.state["sft"]["steps"] == 3
    assert "the session clock stopped training after 3 steps" in out
    assert (tmp_path / "ckpts" / "actor" / "3" / "model_params").is_dir()
    assert not stages.ready("next")
    assert "next: not started, the session clock has run out" in capsys.readouterr().out
    assert pipeline.Stages(tmp_path, {"sft": 1.0, "next": 0.0}, clock).to_do() == ["next"]


def test_without_the_guard_a_worse_stage_is_adopted_and_its_change_kept(tmp_path, capsys):
    clock = session.Session(tmp_path, hours=None, started=time.time())
    stages = pipeline.Stages(tmp_path, {"sft": 1.0}, clock)
    stages.finish("sft", tmp_path / "sft" / "export" / "hf", steps=3)
    assert stages.decide("sft", (-0.2, 0.05, 40), guard=False) and stages.final() == "sft"
    assert "adopted: judged score -0.200" in capsys.readouterr().out
    assert stages.state["sft"]["adoption"]["why"].endswith("wholly below 0 (the guard is off)")


def test_a_domain_the_judge_fails_is_ignored_or_stops_the_run_as_judge_check_says(capsys):
    """The smoke grader misses absent tags in code: calibration names code as failed. 'stop'
    ends the run before any training; 'ignore' scores code 0 without grading it (so no pair, kept
    answer or judge reward comes from code), the other domains graded as before."""
    tasks = testing.synthetic_tasks(600, seed=0)
    heldout, _ = domains.split_heldout([t.record() for t in tasks], 4)
    graded = []

    def grade(questions, completions):
        graded.extend(questions)
        return testing.rubric_grader(tasks)(questions, completions)

    judge = judging.Judge(grade)
    calibration = domains.calibrate(judge, heldout)
    assert calibration["failed"] == ["code"], calibration
    with pytest.raises(domains.CalibrationError, match="failed its calibration in code"):
        domains.act_on_calibration(calibration, judge, heldout, "stop")
    with pytest.raises(ValueError, match="JUDGE_CHECK='drop'"):
        domains.act_on_calibration(calibration, judge, heldout, "drop")
    # a rehearsal times the judge: it keeps grading, and says what the real run would do
    assert domains.act_on_calibration(calibration, judge, heldout, "stop", rehearsal=True)
    assert "the real run would stop" in capsys.readouterr().out and not judge.ignored
    assert domains.act_on_calibration(calibration, judge, heldout, "ignore") == ["code"]
    code = [r for r in heldout if r["domain"] == "code"]
    other = [r for r in heldout if r["domain"] != "code"]
    graded.clear()
    scores = judge.scores([r["prompt"] for r in code + other], ["x"] * len(code + other))
    assert scores[: len(code)] == [0.0] * len(code)
    assert graded and not set(graded) & {r["prompt"] for r in code}  # code was not graded


def test_reasoning_the_data_did_not_write_is_the_models_and_the_judge_picks_the_answer(
    monkeypatch, capsys
):
    """Rejection sampling for rows without reasoning (the mix's dolly and MBPP rows): the model's
    best whole answer in the format is kept only where the judge scores it at least as high as the
    data set's answer behind the same reasoning, else the data set's answer follows the model's
    reasoning; rows with no whole answer in the format are left out and counted; rows with
    reasoning pass as they are."""
    from types import SimpleNamespace

    from tunixkit import evaluation, families

    said = {  # prompt -> the model's answer to it, and whether the generation limit cut it
        "p-won": ("<reasoning>r1</reasoning>\n<answer>great</answer>", False),
        "p-lost": ("<reasoning>r2</reasoning>\n<answer>meh</answer>", False),
        "p-cut": ("<reasoning>r3</reasoning>\n<answer>great</answer>", True),
        "p-untagged": ("great, no tags", False),
    }

    def generate(loaded, prompts, config, progress=False, logprobs=False, sampler=None):
        answers = [next(v for k, v in said.items() if k in p) for p in prompts]
        return [evaluation.Generation(text, 9, cut) for text, cut in answers]

    points = {"great": 9, "best": 8, "ref": 5, "meh": 3}
    judged = []

    def grader(prompts, completions, **kw):
        judged.extend(completions)
        return [
            f"Score: {next((n for w, n in points.items() if f'<answer>{w}' in c), 0)}"
            for c in completions
        ]

    monkeypatch.setattr(evaluation, "generate", generate)
    monkeypatch.setattr(evaluation, "make_sampler", lambda loaded, size: None)  # generate is fake
    loaded = SimpleNamespace(chat=families.GEMMA_CHAT)
    judge = judging.Judge(grader, name="judge")
    config = evaluation.EvalConfig(temperature=0.7, top_p=1.0, batch_size=8)

    def row(prompt, answer, domain="creative"):
        return {
            "domain": domain,
            "prompt": prompt,
            "response": prompting.format_completion(None, answer),
            "reasoned": False,
        }

    math = {"domain": "math", "prompt": "1+1?", "response": prompting.format_completion("1+1", "2")}
    records = [
        row("p-won", "ref"),
        math,
        row("p-lost", "best", "code"),
        row("p-cut", "ref"),
        row("p-untagged", "ref"),
    ]
    rows, report = pipeline.write_reasoning(loaded, records, judge, config, samples=2)
    assert [r["prompt"] for r in rows] == ["p-won", "1+1?", "p-lost"]  # in order; 2 left out
    assert rows[0]["response"] == said["p-won"][0] + "<end_of_turn>" and rows[0]["reasoned"]
    assert rows[1] is math
    # the judge preferred the data set's answer: it follows the model's reasoning
    assert rows[2]["response"] == "<reasoning>r2</reasoning>\n<answer>best</answer><end_of_turn>"
    assert [r.get("answer_by") for r in rows] == ["model", None, "data"]
    # the data set's answer was judged behind the model's own reasoning, so only answers differ
    assert "<reasoning>r1</reasoning>\n<answer>ref</answer>" in judged
    assert "<reasoning>r2</reasoning>\n<answer>best</answer>" in judged
    assert not any("r3" in c and "<answer>ref" in c for c in judged)  # a cut answer is not judged
    assert report["rows"] == 4 and report["sampled"] == 4 and report["kept"] == 2
    assert report["by_domain"] == {
        "creative": {"rows": 3, "sampled": 3, "model": 1, "data": 0},
        "code": {"rows": 1, "sampled": 1, "model": 0, "data": 1},
    }
    out = capsys.readouterr().out
    assert "for 2 of 4 rows without reasoning" in out and "2 left out" in out
    assert pipeline.write_reasoning(loaded, [math], judge, config)[0] == [math]  # nothing to do


def test_06s_tasks_by_profile_smoke_made_offline_full_from_traces_and_gsm8k(tmp_path):
    """recipes.pipeline_tasks: smoke makes every domain's tasks and the grader that plays the
    judge (its replies as a judge model's, "Score: N" of 10); full reads the traces through the traces loader and adds GSM8K's math (a local copy in
    the hub's layout), each row with its domain, math rows with their answer."""
    from tunixkit import recipes

    smoke_rt = runtime.resolve("smoke", verbose=False)
    smoke = recipes.pipeline_tasks(smoke_rt, recipes.Pipeline.smoke(), tmp_path / "data")
    assert len(smoke.records) == recipes.Pipeline.smoke().train_tasks
    assert {r["domain"] for r in smoke.records} == set(domains.DOMAINS)
    (reply,) = smoke.grader([smoke.records[0]["prompt"]], [smoke.records[0]["response"]])
    assert reply == "Score: 10"  # the reference answer, graded by its task's own rubric
    full_rt = dataclasses.replace(smoke_rt, profile="full")
    recipe = dataclasses.replace(
        recipes.Pipeline.full(),
        train_tasks=24,
        heldout_per_domain=3,
        domain_shares={"creative": 1.0, "math": 1.0},  # 12 rows of each
    )
    traces = testing.write_trace_rows(tmp_path / "traces.jsonl", 16)
    gsm = testing.write_gsm8k_hub(tmp_path / "gsm8k", n_train=40, n_test=8)
    cell = {"TRACES": str(traces), "GSM8K_PATH": gsm}  # the notebook's parameters
    full = recipes.pipeline_tasks(full_rt, recipe, tmp_path / "data", cell)
    assert full.grader is None  # the judge is a model in full
    math = [r for r in full.records if r["domain"] == "math" and "answer" in r]
    assert len(full.records) == 16 + len(math) and len(math) == 12 + 3  # train share, held out
    with pytest.raises(runtime.DownloadError, match="MIX_PATHS"):  # no traces, offline: the mix
        recipes.pipeline_tasks(full_rt, recipe, tmp_path / "data", {"GSM8K_PATH": gsm})
