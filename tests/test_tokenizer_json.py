"""A model folder with a Hugging Face ``tokenizer.json`` (and no ``tokenizer.model``) goes through
SFT, DPO, GRPO and evaluation exactly as the SentencePiece folder does.

The smoke tokenizer is converted (``testing.write_hf_tokenizer``) into a copy of the smoke model's
folder, and both folders are loaded through ``models.load_model``. The conversion has the same ids
on every line of the text the tokenizer was trained on, so every stage must give the same batches,
the same rollouts and the same answers from either folder: a difference means the tokenizer.json
path treats BOS, padding, stop ids or decoding otherwise than the SentencePiece path.
"""

import dataclasses
import json
import shutil

import numpy as np
import pytest

from tunixkit import (
    data,
    evaluation,
    models,
    preferences,
    prompting,
    rewards,
    rl,
    runtime,
    testing,
    training,
)

ID = "tiny-gemma3-sft"


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / ID
    shutil.copytree(testing.materialize(ID), folder)
    (folder / "tokenizer.model").unlink()
    testing.write_hf_tokenizer(testing.tokenizer_path(), folder)
    mesh = runtime.make_mesh()
    return [
        models.load_model(ID, mesh=mesh, verbose=False),
        models.load_model(ID, path=folder, mesh=mesh, verbose=False),
    ]


@pytest.fixture(scope="module")
def records():
    return data.to_records(testing.synthetic_gsm8k(64, seed=21), "s", verbose=False)[0]


def _arrays(batches):
    rows = [b if isinstance(b, dict) else dataclasses.asdict(b) for b in batches]
    return [{k: np.asarray(v) for k, v in row.items()} for row in rows]


def _same(a, b):
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
        for x, y in zip(a, b, strict=True)
    )


def test_same_ids_special_tokens_and_text(both):
    sp, hf = (lm.tokenizer for lm in both)
    assert (sp.kind, hf.kind, hf.vocab_size) == ("sentencepiece", "huggingface", sp.vocab_size)
    for line in testing.tokenizer_corpus():
        ids = hf.encode(line)
        assert ids == sp.encode(line), line
        assert hf.decode(ids) == line, line
    assert [hf.bos_id(), hf.eos_id(), hf.pad_id(), hf.stop_ids()] == [
        sp.bos_id(),
        sp.eos_id(),
        sp.pad_id(),
        sp.stop_ids(),
    ]
    assert both[1].eos_ids == both[0].eos_ids
    assert hf.dedup_bos_ids([hf.bos_id()] * 2 + [7]) == [hf.bos_id(), 7]


def test_sft_and_preference_batches(both, records):
    pairs = [data.sft_pair(r) for r in records]
    sft = [
        _arrays(
            training.sft_dataset(
                pairs, lm.tokenizer, max_len=144, batch_size=8, packing=True, verbose=False
            )
        )
        for lm in both
    ]
    assert _same(*sft) and len(sft[0]) > 1
    prefs = [
        {"prompt": prompt, "chosen": target, "rejected": "no idea" + prompting.END_OF_TURN}
        for prompt, target in pairs[:16]
    ]
    dpo = [
        _arrays(
            preferences.preference_dataset(
                prefs, lm.tokenizer, batch_size=4, max_prompt_length=88, max_response_length=48
            )
        )
        for lm in both
    ]
    assert _same(*dpo) and len(dpo[0]) == 4


def test_evaluation_answers(both, records):
    results = [
        evaluation.evaluate(
            lm,
            records[:8],
            name=lm.tokenizer.kind,
            progress=False,
            config=evaluation.EvalConfig.smoke(),
        )
        for lm in both
    ]
    texts = [[p["completion"] for p in r.predictions] for r in results]
    assert texts[0] == texts[1] and results[0].accuracy == results[1].accuracy
    assert results[0].format_rate > 0.5, results[0].summary()  # the SFT'd smoke model answers


def test_grpo_rollouts_and_rewards(both, records, tmp_path):
    mesh = runtime.make_mesh()
    settings = rl.GRPOSettings(
        learning_rate=1e-3,
        beta=0.1,
        max_prompt_length=96,
        max_generation_steps=32,
        batch_size=2,
        num_generations=2,
        num_steps=2,
        checkpoint_every=2,
    )
    runs = []
    for lm in both:
        out = tmp_path / lm.tokenizer.kind
        actor = models.apply_lora(lm.model, rank=4, alpha=8.0, mesh=mesh, seed=0, verbose=False)
        learner, _ = rl.build_grpo(
            actor,
            lm.model,
            lm.tokenizer,
            mesh=mesh,
            settings=settings,
            reward_fns=rewards.DEFAULT_REWARDS,
            output_dir=out,
            eos_ids=lm.eos_ids,
            vocab_size=lm.config.num_embed,
        )
        batches = data.grpo_dataset(records, batch_size=2, num_batches=2)
        result = training.run(learner, batches, mesh=mesh, metrics_file=out / "metrics.jsonl")
        assert (result.steps, result.stopped) == (2, "done")
        rows = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
        runs.append((rows, rl.curves(out / "metrics.jsonl")["reward"][1].tolist()))
    assert runs[0] == runs[1]
    assert any(row["completion"].strip() for row in runs[0][0])
