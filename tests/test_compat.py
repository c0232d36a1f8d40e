"""Each workaround in tunixkit._compat, next to the tunix 0.1.7 behaviour it works around.

Every test first shows what tunix does on its own; when a tunix upgrade fixes one, that assertion
fails and names the workaround to drop.
"""

import json
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest
from tunix.rl.agentic.agents.tool_agent import ToolAgent
from tunix.rl.agentic.environments.tool_environment import ToolEnvironment
from tunix.rl.agentic.parser.chat_template_parser.parser import GemmaChatTemplateParser

from tunixkit import _compat, agentic, runtime, testing, training

QUESTION = {"question": np.array(["What is 2 + 3?"]), "answer": np.array(["5"])}


def test_the_qwen_tool_parser_is_quiet_only_while_an_agent_parses_and_importing_patches_nothing():
    script = textwrap.dedent(
        """
        import tunixkit.agentic  # importing patches nothing
        from tunix.rl.agentic.parser.tool_parser import qwen_parser
        from tunixkit import _compat, agentic

        bad = '<tool_call>{not json}</tool_call>'
        qwen_parser.QwenToolParser().parse(bad)
        print("---")
        with _compat.quiet_tool_parser():
            qwen_parser.QwenToolParser().parse(bad)
            with _compat.quiet_tool_parser():  # blocks may nest (or overlap across threads)
                pass
            qwen_parser.QwenToolParser().parse(bad)
        agent = agentic.CalculatorAgent("Solve.", "qwen", agentic.TOOLS)
        agent.update_from_model(bad)  # the agent's own parse: quiet
        print("---")
        qwen_parser.QwenToolParser().parse(bad)  # tunix's module as tunix left it
        assert "print" not in vars(qwen_parser)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    before, quiet, after = out.split("---\n")
    assert "Error parsing tool call" in before and "Error parsing tool call" in after
    assert quiet == ""


def test_tunix_tool_agent_keeps_the_question_as_an_array_the_text_agent_as_text():
    raw = ToolAgent("Solve.\n", "qwen", agentic.TOOLS)
    raw.update_from_env(QUESTION, 0.0, False, {})
    content = raw.chat_completions[-1]["content"]
    assert not isinstance(content, str)  # the batch's array, which the template writes as its repr
    assert "['What is 2 + 3?']" in f"{content}"
    fixed = _compat.TextQuestionAgent("Solve.\n", "qwen", agentic.TOOLS, tools_prompt="Short.")
    fixed.update_from_env(QUESTION, 0.0, False, {})
    assert fixed.chat_completions[-1] == {"role": "user", "content": "What is 2 + 3?"}
    assert "Short." in fixed.chat_completions[0]["content"]


def test_tunix_gemma_parser_edits_the_callers_messages_the_copying_one_does_not():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    tok = testing.load_tokenizer()
    raw = [dict(m) for m in messages]
    first = GemmaChatTemplateParser(tok).parse(raw, add_generation_prompt=True)
    assert json.dumps(raw) != json.dumps(messages)  # tunix rewrote the caller's turns
    assert GemmaChatTemplateParser(tok).parse(raw, add_generation_prompt=True) != first
    kept = [dict(m) for m in messages]
    parser = _compat.CopyingGemmaParser(tok)
    once = parser.parse(kept, add_generation_prompt=True)
    assert parser.parse(kept, add_generation_prompt=True) == once and kept == messages


def _bad_call():
    return [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "calculator", "arguments": '"23 * 47"'},
        }
    ]


def test_tunix_tool_environment_raises_on_a_malformed_call_the_forgiving_one_answers_it():
    raw = ToolEnvironment({"question": "q"}, tool_map=agentic.TOOLS, max_steps=2)
    raw.reset()
    with pytest.raises(Exception):  # noqa: B017 - any exception ends tunix's train()
        raw.step(_bad_call())
    seen = []

    class Recording(_compat.ForgivingToolEnvironment):
        def tool_called(self, call, result):
            seen.append(result)

    env = Recording({"question": "q"}, tool_map=agentic.TOOLS, max_steps=2)
    env.reset()
    obs, _, done, _ = env.step(_bad_call())
    assert not done and obs["tool_outputs"]["c1"].startswith("Error: malformed call")
    assert seen == [obs["tool_outputs"]["c1"]]


def test_each_sampler_call_gets_its_own_seed():
    seeds = []
    rollout = types.SimpleNamespace(
        generate=lambda prompts, config, **kw: seeds.append(config.seed)
    )
    cluster = types.SimpleNamespace(rollout=rollout, global_steps=0)
    config = types.SimpleNamespace(seed=7)
    import dataclasses

    @dataclasses.dataclass
    class Config:
        seed: int

    _compat.fresh_seed_per_call(cluster, 100)
    for step in (0, 0, 0, 1, 1):
        cluster.global_steps = step
        cluster.rollout.generate(["p"], Config(seed=config.seed))
    stride = _compat.SEED_STRIDE
    assert seeds == [101, 102, 103, 101 + stride, 102 + stride]
    # a resumed run (a new process at step 1, as tunix restores it) samples with the same seeds
    seeds.clear()
    sample = types.SimpleNamespace(generate=lambda prompts, config, **kw: seeds.append(config.seed))
    resumed = types.SimpleNamespace(rollout=sample)
    resumed.global_steps = 1
    _compat.fresh_seed_per_call(resumed, 100)
    for _ in range(2):
        resumed.rollout.generate(["p"], Config(seed=7))
    assert seeds == [101 + stride, 102 + stride]


def test_tunix_orpo_path_logs_an_odds_ratio_simpo_drops_it():
    from tunix.sft.dpo import dpo_trainer

    cfg = testing.config("tiny-gemma3")
    model = testing.random_model(cfg)
    config = dpo_trainer.DPOTrainingConfig(algorithm="orpo", eval_every_n_steps=10, max_steps=1)
    trainer = dpo_trainer.DPOTrainer(model, None, training.optimizer(1e-3, 1), config)
    assert "odds_ratio" in trainer._aux_metrics_to_log
    assert "odds_ratio" not in _compat.without_aux_metric(trainer, "odds_ratio")._aux_metrics_to_log


def test_gemma3_query_and_key_norms_are_private_in_tunix_and_read_through_one_accessor():
    cfg = testing.config("tiny-gemma3")
    attn = testing.random_model(cfg).layers[0].attn
    assert not hasattr(attn, "query_norm") and not hasattr(attn, "key_norm")
    query_norm, key_norm = _compat.gemma3_qk_norms(attn)
    assert query_norm.scale.value.shape == key_norm.scale.value.shape == (cfg.head_dim,)


def _compiled_prefill(sampler, ids: np.ndarray, total: int):
    """``sampler``'s prefill, compiled for the greedy state of the left-padded prompts ``ids`` in a
    ``total``-token buffer."""
    import jax

    state = sampler.init_sample_state(
        ids,
        total_sampling_steps=total,
        include_logits=False,
        forbidden_token_ids=None,
        temperature=0.0,
        top_p=None,
        top_k=None,
        seed=jax.random.PRNGKey(0),
        beam_size=None,
    )
    return sampler._compiled_prefill_fn.lower(
        sampler._flattened_transformer_state, state, None, echo=False
    ).compile()


def test_tunix_sampler_computes_every_row_on_every_device_the_batch_sharded_one_splits_them():
    import jax
    from tunix.generate import sampler as sampler_lib

    from tunixkit import evaluation, models, runtime

    mesh = runtime.make_mesh()  # 2 CPU devices
    loaded = models.load_model("tiny-gemma3-sft", mesh=mesh)  # 2 CPU devices
    cfg = loaded.config
    cache = sampler_lib.CacheConfig(
        cache_size=64 + 8,
        num_layers=cfg.num_layers,
        num_kv_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
    )
    prompts = [loaded.chat.prompt(f"What is {i} + {i}?") for i in range(4)]
    kinds = {"tunix": sampler_lib.Sampler, "split": _compat.BatchShardedSampler}
    samplers = {k: cls(loaded.model, loaded.tokenizer, cache) for k, cls in kinds.items()}
    for sampler in samplers.values():
        sampler.eos_ids = jax.numpy.array(loaded.eos_ids)  # as Sampler.__call__ sets them
    placed = {}
    for kind, sampler in samplers.items():
        ids = np.stack(
            [np.pad(sampler.tokenize(p), (64 - len(sampler.tokenize(p)), 0)) for p in prompts]
        )
        compiled = _compiled_prefill(sampler, ids, 72)
        placed[kind] = compiled.input_shardings[0][1].token_buffer
    assert placed["tunix"].is_fully_replicated  # each device prefills all 4 rows
    assert placed["split"].shard_shape((4, 72)) == (2, 72)  # 2 rows a device
    assert samplers["split"].ways == 2
    # the same tokens, greedy and sampled
    for kw in ({"temperature": 0.0}, {"temperature": 1.0, "top_p": 1.0, "seed": 3}):
        texts = [
            s(prompts, max_generation_steps=8, max_prompt_length=64, echo=False, **kw).text
            for s in samplers.values()
        ]
        assert texts[0] == texts[1]
    # evaluation.generate pads a last batch of 1 to the 2 devices it splits over
    sizes = []

    class Recording(_compat.BatchShardedSampler):
        def __call__(self, batch, **kwargs):
            sizes.append(len(batch))
            return super().__call__(batch, **kwargs)

    config = evaluation.EvalConfig(max_prompt_length=64, max_generation_steps=8, batch_size=4)
    recording = Recording(loaded.model, loaded.tokenizer, cache)
    gens = evaluation.generate(loaded, prompts[:1], config, progress=False, sampler=recording)
    assert (len(gens), sizes) == (1, [2])


def test_a_batch_is_split_by_rows_only_when_they_divide_and_scores_the_same(monkeypatch):
    import jax

    from tunixkit import models, preferences, runtime

    mesh = runtime.make_mesh()  # 2 CPU devices
    x, odd = np.zeros((4, 3), np.int32), np.zeros((3, 3), np.int32)
    a, b = _compat.split_rows((x, x), mesh)
    assert a.sharding.shard_shape(a.shape) == b.sharding.shard_shape(b.shape) == (2, 3)
    kept = _compat.split_rows((x, odd), mesh)  # 3 rows do not divide by 2: nothing is placed
    assert kept[0] is x and kept[1] is odd and _compat.split_rows(x, None) is x
    abstract = _compat.split_rows(jax.ShapeDtypeStruct((4, 3), np.int32), mesh)
    assert abstract.sharding.shard_shape(abstract.shape) == (2, 3)
    # held-out preference scoring: the same log-probabilities with the rows split or not
    loaded = models.load_model("tiny-gemma3-sft", mesh=mesh)
    rng = np.random.default_rng(0)
    batch = {
        f"{part}_{kind}": rng.integers(3, 500, (2, n)).astype(np.int32)
        if kind == "ids"
        else np.ones((2, n), np.int32)
        for part, n in (("prompt", 8), ("chosen", 6), ("rejected", 6))
        for kind in ("ids", "mask")
    }
    split = preferences.sequence_logps(loaded.model, batch)
    monkeypatch.setattr(_compat, "split_rows", lambda tree, mesh: tree)
    whole = preferences.sequence_logps(loaded.model, batch)
    np.testing.assert_allclose(split, whole, rtol=1e-5)


def test_split_rollout_batches_refuses_a_vanilla_rollout_without_its_sampler():
    """If tunix moves the vanilla rollout's sampler, the patch says so instead of silently leaving
    every device to sample every row; other engines are left alone."""
    import types

    from tunix.rl.rollout.vanilla_rollout import VanillaRollout

    moved = VanillaRollout.__new__(VanillaRollout)  # no ._sampler, as after a rename
    with pytest.raises(RuntimeError, match="_sampler"):
        _compat.split_rollout_batches(types.SimpleNamespace(rollout=moved))
    _compat.split_rollout_batches(types.SimpleNamespace(rollout=object()))  # e.g. vLLM's


def test_the_distillation_soft_loss_counts_answer_tokens_only():
    """tunix's LogitStrategy averages the KL to the teacher over every position, the prompt's and
    the padding's too: a student that matches the teacher on every answer token still has a soft
    loss. AnswerTokenLogitStrategy's is 0 there, and its hard loss is per answer token."""
    import jax
    from tunix.distillation import strategies

    rng = np.random.default_rng(0)
    vocab, length = 11, 6
    teacher = rng.normal(size=(2, length, vocab)).astype(np.float32)
    student = teacher.copy()
    student[:, :3] = rng.normal(size=(2, 3, vocab))  # differs on the prompt positions only
    labels = np.zeros((2, length, vocab), np.float32)
    labels[:, 3:, 1] = 1.0  # the answer tokens: positions 3-5
    kw = dict(student_forward_fn=None, teacher_forward_fn=None, labels_fn=None, temperature=2.0)
    theirs = strategies.LogitStrategy(**kw, alpha=1.0).compute_loss(student, teacher, labels)[0]
    ours = _compat.AnswerTokenLogitStrategy(**kw, alpha=1.0)
    assert float(theirs) > 0.1
    assert float(ours.compute_loss(student, teacher, labels)[0]) == pytest.approx(0.0, abs=1e-6)
    hard = _compat.AnswerTokenLogitStrategy(**kw, alpha=0.0).compute_loss(student, teacher, labels)
    ce = -jax.nn.log_softmax(teacher[:, 3:], axis=-1)[..., 1].mean()
    assert float(hard[0]) == pytest.approx(float(ce), rel=1e-5)
    evaluated = _compat.AnswerTokenLogitStrategy(**kw, alpha=0.7).compute_eval_loss(student, labels)
    assert float(evaluated[0]) == pytest.approx(float(ce), rel=1e-5)


def test_tunix_gemma_projects_every_position_the_choice_pass_only_the_last():
    """tunix's forward pass returns the logits of every position (rows x length x vocabulary);
    choice_logprobs gives the last position's log-probabilities of a few tokens, equal to those,
    on left-padded rows split over the mesh, and its compiled program does not project the other
    positions."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from tunix.rl import common

    from tunixkit import models, runtime

    mesh = runtime.make_mesh()  # 2 CPU devices
    loaded = models.load_model("tiny-gemma3-sft", mesh=mesh)
    model, vocab = loaded.model, loaded.config.num_embed
    rng = np.random.default_rng(0)
    rows, width = 4, 256
    ids = rng.integers(3, vocab, (rows, width)).astype(np.int32)
    mask = np.ones((rows, width), bool)
    mask[1, :100] = mask[3, :7] = False  # left padding
    ids[~mask] = 0
    ids, mask = jnp.asarray(ids), jnp.asarray(mask)
    positions = common.build_positions_from_mask(mask)

    def full(model, ids, mask):
        attn = model.get_attention_mask(ids, inputs_mask=mask)
        return model(ids, positions, None, attn)[0]

    logits = nnx.jit(full)(model, ids, mask)
    assert logits.shape == (rows, width, vocab)  # what tunix computes for a scoring pass
    choices = jnp.asarray([5, 17, 300], jnp.int32)
    fn = _compat.choice_logprobs(model)
    state = nnx.state(model)
    split_ids, split_mask = _compat.split_rows((ids, mask), _compat.mesh_of(state))
    got = np.asarray(fn(state, split_ids, split_mask, choices))
    want = np.asarray(jax.nn.log_softmax(logits[:, -1].astype(jnp.float32)))[:, choices]
    np.testing.assert_allclose(got, want, atol=1e-5)
    # the projection onto the vocabulary at every position is gone from the compiled pass: its
    # cost (2 x rows x length x embed x vocabulary flops, shared by the devices) is what the two
    # programs differ by
    ours = fn.lower(state, ids, mask, choices).compile().cost_analysis()["flops"]
    theirs = nnx.jit(full).lower(model, ids, mask).compile().cost_analysis()["flops"]
    projection = 2 * rows * width * loaded.config.embed_dim * vocab / mesh.size
    assert theirs - ours > 0.9 * projection, (theirs, ours, projection)


@pytest.mark.parametrize(
    "model_id, lora",
    [("tiny-gemma3-sft", False), ("tiny-gemma2", False), ("tiny-gemma3-sft", True)],
)
def test_tunix_sampler_prefill_projects_every_prompt_position_ours_the_last(model_id, lora):
    """tunix's Sampler passes ``decode_only_last_token`` only to a model that takes it, and its
    Gemma3 and Gemma2 do not: the prefill projects every prompt position onto the vocabulary.
    prefill_last_position's sampler gives the same tokens and log-probabilities, greedy and sampled
    (Gemma2 with its final soft-cap; a LoRA model, as GRPO's rollouts sample, whose class qwix
    has made a subclass of tunix's), from a compiled prefill without that projection."""
    import jax
    from flax import nnx
    from tunix.generate import sampler as sampler_lib

    from tunixkit import models, runtime

    mesh = runtime.make_mesh()  # 2 CPU devices
    loaded = models.load_model(model_id, mesh=mesh, verbose=False)
    model, cfg = loaded.model, loaded.config
    if lora:  # adapters that change the answers (a fresh LoRA's B is zero)
        model = models.apply_lora(model, rank=4, alpha=8.0, mesh=mesh, verbose=False)
        assert type(model) is not type(loaded.model)  # qwix's subclass of tunix's Gemma3
        adapters = nnx.state(model, nnx.LoRAParam)
        key = jax.random.PRNGKey(1)
        nnx.update(
            model, jax.tree.map(lambda x: x + 0.05 * jax.random.normal(key, x.shape), adapters)
        )
    cache = sampler_lib.CacheConfig(
        cache_size=128,
        num_layers=cfg.num_layers,
        num_kv_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
    )
    theirs = sampler_lib.Sampler(model, loaded.tokenizer, cache)
    ours = sampler_lib.Sampler(model, loaded.tokenizer, cache)
    assert not theirs._supports_decode_only_last_token
    assert _compat.prefill_last_position(ours) and ours._supports_decode_only_last_token
    prompts = [loaded.chat.prompt(f"What is {i} + {2 * i}?") for i in range(4)]
    for kw in ({"temperature": 0.0}, {"temperature": 1.0, "top_p": 1.0, "seed": 3}):
        a, b = (
            s(prompts, max_generation_steps=16, max_prompt_length=64, return_logprobs=True, **kw)
            for s in (theirs, ours)
        )
        assert a.text == b.text and a.tokens[0].tolist() == b.tokens[0].tolist()
        np.testing.assert_allclose(
            np.concatenate(a.logprobs), np.concatenate(b.logprobs), atol=1e-6
        )

    rows, width = 4, 64
    flops = {}
    for kind, sampler in (("theirs", theirs), ("ours", ours)):
        compiled = _compiled_prefill(sampler, np.zeros((rows, width), np.int32) + 5, 128)
        flops[kind] = compiled.cost_analysis()["flops"]
    # the projection of every position but the last (2 x rows x positions x embed x vocabulary
    # flops, shared by the devices) is what the two prefills differ by
    projection = 2 * rows * (width - 1) * cfg.embed_dim * cfg.num_embed / mesh.size
    assert flops["theirs"] - flops["ours"] > 0.9 * projection, (flops, projection)


@pytest.mark.parametrize("rollout, calls", [(None, [8, 8]), (2, [4, 4, 4, 4])])
def test_a_grpo_step_samples_its_rollouts_in_one_call(tmp_path, monkeypatch, rollout, calls):
    """Two GRPO steps of 4 prompts x G=2, updated in micro-batches of 2 prompts (the kill-and-resume
    tests' GRPO job): by default each step's rollouts are one sampler call of its 8 rows (decode
    re-reads every weight per token whatever the rows); ``rollout_micro_batch_size=2`` gives two
    calls of 4, as before."""
    import resume_job

    rows = []

    def record(self, input_strings, **kwargs):
        rows.append(len(input_strings))
        return sampler_call(self, input_strings, **kwargs)

    sampler_call = _compat.BatchShardedSampler.__call__
    monkeypatch.setattr(_compat.BatchShardedSampler, "__call__", record)
    mesh = runtime.make_mesh()
    learner, batches, _, _ = resume_job.grpo(
        tmp_path, mesh, steps=2, rollout_micro_batch_size=rollout
    )
    result = training.run(
        learner, batches, mesh=mesh, metrics_file=tmp_path / "metrics.jsonl", label="GRPO"
    )
    assert (result.steps, rows) == (2, calls)


def test_the_real_model_figures_of_the_last_position_prefill():
    """``bench/prefill_last_position.py``'s committed run (the real Gemma 3 270M, its 262,144-token
    vocabulary, on a CPU like this one): the same tokens and log-probabilities as tunix's sampler,
    from a prefill with fewer flops and temporaries, and a faster sampler call."""
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "bench/results/prefill_last_position.json"
    found = json.loads(path.read_text())
    assert found["model"].startswith("gemma-3-270m") and found["vocabulary"] == 262_144
    assert found["identical_texts"] and found["max_logprob_difference"] < 1e-4
    theirs, ours = found["compiled"]["tunix"], found["compiled"]["last_position"]
    assert ours["prefill_gflops"] < theirs["prefill_gflops"]
    assert ours["prefill_temp_mib"] < theirs["prefill_temp_mib"]
    assert found["verdict"] == "met" and found["interval"][1] <= found["target"], found
