"""Preference tokenization, metrics on disk, distillation's vocabulary check, dataset columns."""

import dataclasses
import types

import numpy as np
import pytest

from tunixkit import data, distill, families, preferences, prompting, runlog, testing


def test_preference_tokens_follow_the_prompt_without_a_second_bos():
    tok = testing.load_tokenizer()
    pair = {
        "prompt": prompting.format_prompt("1+1?"),
        "chosen": "<answer>2</answer>",
        "rejected": "3",
    }
    item = preferences.tokenize([pair], tok, max_prompt_length=96, max_response_length=16)[0]
    prompt = item["prompt_ids"][item["prompt_mask"] == 1]
    assert prompt[0] == tok.bos_id() and item["prompt_mask"][0] == 0  # left-padded, BOS first
    chosen = item["chosen_ids"][item["chosen_mask"] == 1]
    assert chosen[0] != tok.bos_id() and list(chosen) == tok.encode(pair["chosen"])
    assert item["rejected_mask"].sum() == len(tok.encode("3"))


def test_metrics_file_rows_dedupe_by_step_and_bad_lines_name_the_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"mode": "eval", "step": 0, "loss": 3.0}\n{"mode": "train", "step": 1, "loss": 2.0}\n'
        '{"mode": "eval", "step": 0, "loss": 2.5}\n'
    )
    m = runlog.read_metrics(path)
    steps, values = m["eval"]["loss"]
    assert steps.tolist() == [0] and values.tolist() == [2.5]
    path.write_text(path.read_text() + "not json\n")
    with pytest.raises(ValueError, match=r"metrics.jsonl:4"):
        runlog.read_metrics(path)


def _lm(model_id, vocab, tok):
    return types.SimpleNamespace(
        model_id=model_id, config=types.SimpleNamespace(num_embed=vocab), tokenizer=tok
    )


def test_distillation_refuses_different_vocabularies():
    tok = testing.load_tokenizer()
    distill.check_vocab(_lm("t", 400, tok), _lm("s", 400, tok))
    with pytest.raises(distill.VocabularyMismatch, match="400 vocabulary entries, student s 512"):
        distill.check_vocab(_lm("t", 400, tok), _lm("s", 512, tok))


def test_columns_name_missing_fields():
    with pytest.raises(data.DataError, match=r"no column\(s\) \['chosen'\]"):
        data.columns([{"prompt": "p", "rejected": "r"}], ["prompt", "chosen"], source="prefs.jsonl")


def test_digest_changes_with_weights():
    import jax.numpy as jnp

    cfg = testing.gemma3_config(testing.load_tokenizer().vocab_size)
    model = testing.random_model(cfg, 0)
    before = runlog.digest(model)
    emb = model.embedder.input_embedding
    emb.value = emb.value + jnp.asarray(np.float32(1e-3))
    assert runlog.digest(model) != before and len(before) == 16


def test_on_policy_pairs_choose_the_likeliest_correct_and_a_format_error(monkeypatch):
    from tunixkit import evaluation, prompting

    good = "<reasoning>2 + 2 = 4</reasoning>\n<answer>4</answer>"
    garbled = "<reasoning>2 us+ = zz</reasoning>\n<answer>4</answer>"
    samples = [
        evaluation.Generation(garbled, 9, False, -3.0),
        evaluation.Generation(
            "<reasoning>2 + 2 = 5</reasoning>\n<answer>5</answer>", 9, False, -0.5
        ),
        evaluation.Generation("4", 1, False, -1.0),  # no format: rejected before the wrong number
        evaluation.Generation(good, 9, False, -0.2),
    ]
    monkeypatch.setattr(evaluation, "generate", lambda *a, **k: samples)
    record = {"question": "2 + 2?", "answer": "4", "solution": "2 + 2 = 4"}
    config = dataclasses.replace(evaluation.EvalConfig.smoke(), temperature=1.5)
    loaded = types.SimpleNamespace(chat=families.GEMMA_CHAT, family="gemma3")  # generate is faked
    pairs = preferences.on_policy_pairs(loaded, [record], config, samples=4, verbose=False)
    assert pairs == [
        {
            "prompt": prompting.format_prompt("2 + 2?"),
            "chosen": good + prompting.END_OF_TURN,
            "rejected": "4" + prompting.END_OF_TURN,
        }
    ]


def test_the_on_policy_pair_pass_stops_on_its_clock_and_keeps_the_pairs_it_made(
    tmp_path, monkeypatch, capsys
):
    """03's pair pass on the session clock (``Session.part``): it goes a few batches at a time and
    stops when its clock says (here at its second question: an event, not a time), keeping the
    pairs of the questions it answered; they are written, and a rerun trains on the same ones.
    Without a limit the pass is one call, as before."""
    from tunixkit import evaluation, session

    calls = []

    def generate(loaded, prompts, config, logprobs=False, progress=False, sampler=None):
        calls.append(len(prompts))
        right = "<reasoning>r</reasoning>\n<answer>4</answer>"
        return [
            evaluation.Generation(right if i % 2 else "4", 9, False, -1.0)
            for i in range(len(prompts))
        ]

    monkeypatch.setattr(evaluation, "generate", generate)
    monkeypatch.setattr(evaluation, "make_sampler", lambda loaded, size: None)  # generate is fake
    records = [{"question": f"q{i}?", "answer": "4", "solution": "r"} for i in range(40)]
    config = dataclasses.replace(evaluation.EvalConfig.smoke(), temperature=1.0, batch_size=8)
    loaded = types.SimpleNamespace(chat=families.GEMMA_CHAT, family="gemma3")

    pairs = preferences.training_pairs(
        tmp_path,
        "on-policy",
        heldout=4,
        policy=loaded,
        train_records=records,
        heldout_records=records[:4],
        config=config,
        samples=4,
        clock=testing.ScriptedClock(stop_at=2, limit=3600.0),  # a limit; stops at its 2nd question
    )
    said = capsys.readouterr().out
    # chunks of 4 x 8 / 4 = 8 questions: two were sampled, then the clock stopped the pass
    assert "on-policy pairs: the session clock stopped the pass after 16 of 40 prompts" in said
    assert calls == [32, 32, 16] and len(pairs["train"]) == 16 and len(pairs["heldout"]) == 4
    assert [p["prompt"] for p in pairs["train"]] == [
        prompting.format_prompt(r["question"]) for r in records[:16]
    ]
    assert preferences.training_pairs(tmp_path, "on-policy", heldout=4) == pairs  # read back
    # a session without a limit: one call for the whole pass, as before the clock
    calls.clear()
    unlimited = session.Session(tmp_path / "s", hours=None, started=0.0).part(0.5)
    preferences.on_policy_pairs(loaded, records, config, samples=4, clock=unlimited)
    assert calls == [160]


def test_generate_batches_do_not_change_greedy_answers():
    from tunixkit import evaluation, models, prompting

    loaded = models.load_model("tiny-gemma3-sft", verbose=False)
    questions = [
        r["question"]
        for r in data.to_records(testing.synthetic_gsm8k(6, seed=5), "synthetic", verbose=False)[0]
    ]
    prompts = [prompting.format_prompt(q) for q in questions]
    cfg = evaluation.EvalConfig(max_prompt_length=96, max_generation_steps=32, batch_size=4)
    batched = evaluation.generate(loaded, prompts, cfg, progress=False, logprobs=True)
    single = [evaluation.generate(loaded, [p], cfg, progress=False)[0] for p in prompts[:2]]
    assert [g.text for g in batched[:2]] == [g.text for g in single]
    assert all(g.mean_logprob is not None and g.mean_logprob <= 0 for g in batched)
    assert single[0].mean_logprob is None


def test_rollout_engine_is_checked_before_loading_and_never_imported_unless_chosen(monkeypatch):
    import importlib.util
    import sys

    from tunixkit import rl

    rl.check_rollout_engine("vanilla", "gemma3")
    assert "vllm" not in sys.modules and "sgl_jax" not in sys.modules
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    with pytest.raises(
        rl.RolloutEngineUnavailable,
        match=r"needs the 'vllm' module, which is not installed.*vllm-tpu",
    ):
        rl.check_rollout_engine("vllm", "gemma3")
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "sgl_jax" else real(name, *a),
    )
    with pytest.raises(
        rl.RolloutEngineUnavailable, match="mappings only for llama3, qwen2, qwen3, not for gemma2"
    ):
        rl.check_rollout_engine("sglang_jax", "gemma2")
    assert "sgl_jax" not in sys.modules


def test_packed_rows_give_each_example_its_unpacked_loss():
    from tunix.sft import peft_trainer

    from tunixkit import models, training

    lm = models.load_model("tiny-gemma3", verbose=False)
    tok, fn = lm.tokenizer, training.model_inputs_fn(lm.tokenizer.pad_id())
    records = data.to_records(testing.synthetic_gsm8k(16, seed=3), "s", verbose=False)[0]
    pairs = [
        data.sft_pair(r, system_prompt=None) for r in records
    ]  # 47-81 tokens: several fit a row
    unpacked = training.sft_dataset(pairs, tok, max_len=144, batch_size=16)[0]
    (packed,) = list(training.sft_dataset(pairs, tok, max_len=288, batch_size=16, packing=True))
    assert (
        packed.segment_ids.max() >= 3 and packed.input_tokens.shape[0] < 16
    )  # rows hold several examples
    assert int(packed.input_mask.sum()) == int(unpacked.input_mask.sum())  # the same target tokens
    a = float(peft_trainer._default_loss_fn(lm.model, **fn(unpacked)))
    b = float(peft_trainer._default_loss_fn(lm.model, **fn(packed)))
    assert abs(a - b) < 1e-5, (a, b)


def test_a_long_prompt_is_cut_in_its_middle_keeping_its_start_and_end():
    from tunixkit import evaluation, testing

    tok = testing.load_tokenizer()

    def encode(text):
        return [tok.bos_id(), *tok.encode(text)]

    system, end = "Answer in the format. ", " How many are left?"
    prompt = system + "There are 3 apples. " * 60 + end
    cut = evaluation._clip(prompt, encode, tok, 64)
    assert len(encode(cut)) <= 64 < len(encode(prompt))
    assert cut.startswith("Answer in the format.") and cut.endswith("How many are left?")
    assert evaluation.CUT_MARK in cut
    assert evaluation._clip("Short.", encode, tok, 64) == "Short."
