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

from tunixkit import _compat, agentic, testing, training

QUESTION = {"question": np.array(["What is 2 + 3?"]), "answer": np.array(["5"])}


def test_the_qwen_tool_parser_prints_bad_calls_until_quieted_and_importing_patches_nothing():
    script = textwrap.dedent(
        """
        import tunixkit.agentic  # importing patches nothing
        from tunix.rl.agentic.parser.tool_parser import qwen_parser
        from tunixkit import _compat

        bad = '<tool_call>{not json}</tool_call>'
        qwen_parser.QwenToolParser().parse(bad)
        print("---")
        _compat.quiet_tool_parser()
        qwen_parser.QwenToolParser().parse(bad)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    before, after = out.split("---\n")
    assert "Error parsing tool call" in before
    assert after == ""


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
    cluster = types.SimpleNamespace(rollout=rollout)
    config = types.SimpleNamespace(seed=7)
    import dataclasses

    @dataclasses.dataclass
    class Config:
        seed: int

    _compat.fresh_seed_per_call(cluster, 100)
    for _ in range(3):
        cluster.rollout.generate(["p"], Config(seed=config.seed))
    assert seeds == [101, 102, 103]


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
