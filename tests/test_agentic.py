"""The agentic pieces around tunix 0.1.7's learner: the calculator tool, and each workaround."""

import json

import numpy as np
import pytest

from tunixkit import _compat, agentic, calculator, models, prompting, recipes, rl, runtime, testing


def _env(**task):
    log = agentic.Episodes()
    env = agentic.CalculatorEnvironment(task, tool_map=agentic.TOOLS, episodes=log, max_steps=2)
    env.reset()
    return env, log


def _call(name="calculator", arguments='{"expression": "23 * 47"}'):
    return [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]


def test_a_tool_call_runs_the_calculator_and_a_correct_answer_scores():
    env, log = _env(question=np.array(["q"]), answer=np.array(["1081"]))
    obs, reward, done, _ = env.step(_call())
    assert not done and obs == {"tool_outputs": {"c1": "1081"}}
    _, reward, done, _ = env.step("<reasoning>23 * 47 = 1081</reasoning>\n<answer>1081</answer>")
    assert done and reward == 1.0
    (episode,) = log.drain()
    assert (episode.calls, episode.well_formed, episode.correct, episode.used_result) == (
        1,
        1,
        True,
        True,
    )


@pytest.mark.parametrize(
    "arguments",
    ['"23 * 47"', "[1, 2]", '{"expr": "1"}', "not json", '{"expression": "__import__(1)"}'],
)
def test_a_malformed_call_gets_an_error_result_never_an_exception(arguments):
    env, log = _env(question="q", answer="5")
    obs, reward, done, _ = env.step(_call(arguments=arguments))
    (result,) = obs["tool_outputs"].values()
    assert result.lower().startswith("error") and reward == 0.0 and not done
    _, reward, done, _ = env.step("<answer>7</answer>")
    assert done and reward == 0.0 and log.drain()[0].well_formed == 0


def test_the_turn_limit_on_a_tool_call_scores_the_episode_as_unanswered():
    env, log = _env(question="q", answer="5")
    env.step(_call(arguments='{"expression": "2 + 3"}'))
    _, reward, done, _ = env.step(_call(arguments='{"expression": "2 + 3"}'))
    assert done and reward == 0.0
    (episode,) = log.drain()
    assert episode.calls == 2 and not episode.correct


def test_an_episode_the_token_budget_cuts_is_recorded_once_as_unanswered():
    """tunix's collector ends an episode on its token budget without stepping the environment to
    its end; it then calls the environment's final_reward_fn, which records the episode (once)."""
    import inspect

    from tunix.rl.agentic.trajectory import trajectory_collect_engine

    assert "self.env.final_reward_fn" in inspect.getsource(trajectory_collect_engine)
    env, log = _env(question="q", answer="5")
    env.step(_call(arguments='{"expression": "2 + 3"}'))  # then the budget runs out
    assert log.drain() == []
    assert env.final_reward_fn() == 0.0 and env.final_reward_fn() == 0.0
    (episode,) = log.drain()
    assert episode.calls == 1 and not episode.correct
    finished, log = _env(question="q", answer="5")
    finished.step("<answer>5</answer>")
    assert finished.final_reward_fn() == 0.0 and len(log.drain()) == 1  # recorded by its end


def test_the_agent_reads_the_question_as_text_and_the_parser_leaves_messages_alone():
    agent = agentic.CalculatorAgent(
        "Solve.\n", tool_map=agentic.TOOLS, tools_prompt="Use the tool."
    )
    agent.update_from_env(
        {"question": np.array(["What is 2 + 3?"]), "answer": np.array(["5"])}, 0.0, False, {}
    )
    assert agent.chat_completions[-1] == {"role": "user", "content": "What is 2 + 3?"}
    parser = _compat.CopyingGemmaParser(testing.load_tokenizer())
    before = json.dumps(agent.chat_completions)
    first = parser.parse(agent.chat_completions, add_generation_prompt=True)
    assert parser.parse(agent.chat_completions, add_generation_prompt=True) == first
    assert json.dumps(agent.chat_completions) == before
    assert (
        first
        == "<start_of_turn>user\nSolve.\nUse the tool.\nWhat is 2 + 3?<end_of_turn>\n<start_of_turn>model\n"
    )


def test_traces_are_rendered_as_the_rollouts_see_them():
    record = {
        "question": "Tom has 23 pens and buys 47 more. How many?",
        "solution": "23 + 47 = 70 pens.",
        "answer": "70",
    }
    (single,) = agentic.single_call_records([record])
    (p1, c1), (p2, c2) = agentic.trace_pairs([single], testing.load_tokenizer(), tools_prompt="T")
    assert c1 == calculator.tool_call("23 + 47") + "<end_of_turn>"
    assert (
        p2
        == p1
        + calculator.tool_call("23 + 47")
        + "<start_of_turn>user\nTool returned result: 70<end_of_turn>\n<start_of_turn>model\n"
    )
    assert c2.endswith("<answer>70</answer><end_of_turn>")


def test_a_tool_share_below_one_mixes_in_direct_answers_to_the_same_prompt():
    records = [
        {
            "question": f"Tom has {a} pens and buys 2 more. How many?",
            "expression": f"{a} + 2",
            "answer": str(a + 2),
        }
        for a in range(10, 14)
    ]
    pairs = agentic.trace_pairs(records, testing.load_tokenizer(), tools_prompt="T", tool_share=0.5)
    calls = [c for _, c in pairs if c.startswith("<tool_call>")]
    direct = [(p, c) for p, c in pairs if c.startswith("<reasoning>") and "Tool returned" not in p]
    assert len(calls) == 2 and len(direct) == 2 and len(pairs) == 6
    first_turns = {p for p, c in pairs if "Tool returned" not in p}
    assert len(first_turns) == 4  # each question's first turn, tool or not, is the same prompt
    assert direct[0][1] == prompting.format_completion("10 + 2 = 12", "12")
    with pytest.raises(ValueError, match="share must be between 0 and 1"):
        agentic.trace_pairs(records, testing.load_tokenizer(), tool_share=1.5)


def test_metric_fn_reports_the_step_episodes_once():
    log = agentic.Episodes()
    log.add(agentic.outcome("q", "5", "<answer>5</answer>", ["5"], 1))
    log.add(agentic.outcome("q", "5", '<tool_call>{"name": oops', [], 0))
    figures = log.metric_fn(["p"], ["c"])
    assert figures["tool/accuracy"][0] == 0.5 and figures["tool/malformed_rate"][0] == 0.5
    assert figures["tool/tool_call_rate"][0] == 1.0 and figures["tool/well_formed_rate"][0] == 0.5
    assert log.metric_fn(["p"], ["c"])["tool/accuracy"][0] == 0.0  # drained


def test_each_sampler_call_draws_its_own_noise(tmp_path):
    """The agentic learner samples each episode of a group in a call of its own, on the same
    prompt. With the rollout config's one seed every call drew the same tokens: a group's episodes
    were identical, every advantage 0, and GRPO trained on the KL term alone."""
    mesh = runtime.make_mesh()
    lm = models.load_model("tiny-gemma3", mesh=mesh, verbose=False)
    settings = rl.GRPOSettings(temperature=1.0, max_prompt_length=128, max_generation_steps=12)
    cluster = rl.cluster(
        lm.model,
        lm.model,
        lm.tokenizer,
        mesh=mesh,
        settings=settings,
        output_dir=tmp_path,
        eos_ids=lm.eos_ids,
        vocab_size=lm.config.num_embed,
        return_logprobs=True,
    )
    # its rollouts are split over the mesh (a tunix that moved the sampler makes rl.cluster raise)
    assert type(cluster.rollout._sampler) is _compat.BatchShardedSampler
    prompt = prompting.format_prompt(
        "Tom has 3 apples and buys 4 more. How many apples does Tom have?"
    )

    def answers():
        return [cluster.generate([prompt]).text[0] for _ in range(4)]

    assert len(set(answers())) == 1  # tunix 0.1.7 alone: one seed, one answer
    _compat.fresh_seed_per_call(cluster, settings.seed)
    assert len(set(answers())) == 4


def _scripted_episode(turns, budget, *, through_tunix):
    """One episode whose model turns are ``turns`` ((text, tokens) each), run with ``budget``
    tokens either by tunix's trajectory collector (as in training) or by agentic.evaluate."""
    import asyncio
    import types

    from tunix.generate.tokenizer_adapter import TokenizerAdapter
    from tunix.rl.agentic.trajectory.trajectory_collect_engine import TrajectoryCollectEngine
    from tunix.rl.rollout.base_rollout import RolloutOutput

    tok = testing.load_tokenizer()
    script = iter(turns)
    if through_tunix:
        log = agentic.Episodes()
        env = agentic.CalculatorEnvironment(
            {"question": "What is 2 + 3?", "answer": "5"},
            tool_map=agentic.TOOLS,
            episodes=log,
            max_steps=len(turns),
        )

        def model_call(messages, env, max_generation_steps=None):
            text, n = next(script)
            n = min(n, max_generation_steps)  # the sampler stops at what the budget leaves
            return RolloutOutput([text], [None], [np.zeros(n, np.int32)], None, None)

        engine = TrajectoryCollectEngine(
            agentic.CalculatorAgent("Solve.\n", tool_map=agentic.TOOLS, tools_prompt="Use it."),
            env,
            model_call=model_call,
            max_response_length=budget,
            tokenizer=TokenizerAdapter(tok),
            chat_parser=_compat.CopyingGemmaParser(tok),
        )
        asyncio.run(engine.collect(mode="Trajectory"))
        return log.drain()
    from tunixkit import evaluation

    def generate(loaded, prompts, config, **kwargs):
        assert config.max_generation_steps == budget  # every turn may write the whole budget
        text, n = next(script)
        return [evaluation.Generation(text, n, False)] * len(prompts)

    mp = pytest.MonkeyPatch()
    mp.setattr(evaluation, "generate", generate)
    mp.setattr(
        evaluation,
        "make_sampler",
        lambda *a: types.SimpleNamespace(tokenizer=TokenizerAdapter(tok)),
    )
    try:
        config = evaluation.EvalConfig(max_generation_steps=budget)
        return agentic.evaluate(
            types.SimpleNamespace(tokenizer=tok),
            [{"question": "What is 2 + 3?", "answer": "5"}],
            config,
            max_turns=len(turns),
            system_prompt="Solve.\n",
            tools_prompt="Use it.",
        )["episodes"]
    finally:
        mp.undo()


def test_the_evaluation_spends_an_episode_budget_as_training_does():
    """The episode's token budget counts every model turn and the tool's result (tunix 0.1.7's
    max_response_length): an answer that fits what the call and the result leave is scored, one
    token more ends the episode unanswered, in tunix's collector and in agentic.evaluate alike."""
    tok = testing.load_tokenizer()
    agent = agentic._conversation("What is 2 + 3?", "Solve.\n", "Use it.")
    agent.update_from_model(calculator.tool_call("2 + 3"))
    agent.update_from_env({"tool_outputs": {"c1": "5"}}, 0.0, False, {})
    from tunix.generate.tokenizer_adapter import TokenizerAdapter

    result = agentic.result_tokens(agent, TokenizerAdapter(tok), _compat.CopyingGemmaParser(tok))
    assert result > 5  # the result and the turn headers around it
    budget, call = 60, 12
    fits = budget - call - result - 1
    for answer_tokens, correct in ((fits, True), (fits + 1, False)):
        turns = [(calculator.tool_call("2 + 3"), call), ("<answer>5</answer>", answer_tokens)]
        for through_tunix in (True, False):
            (episode,) = _scripted_episode(turns, budget, through_tunix=through_tunix)
            assert episode.correct is correct and episode.calls == 1, (through_tunix, episode)
            assert episode.results == ["5"]


def test_the_episode_budget_is_one_number_for_training_and_the_evaluations(tmp_path):
    """recipes.start checks the recipe once every parameter and override is set: a 07 whose
    evaluations had another token budget than its GRPO would measure episodes training never has."""
    from tunixkit import recipes

    for preset in (recipes.Agentic.smoke(), recipes.Agentic.full(), recipes.Agentic.one_chip()):
        preset.validate()
    _, recipe, _, _ = recipes.start(
        recipes.Agentic,
        "smoke",
        tmp_path / "a",
        verbose=False,
        **{"eval.max_generation_steps": 96, "grpo.max_generation_steps": 96},
    )
    assert recipe.eval.max_generation_steps == recipe.grpo.max_generation_steps == 96
    with pytest.raises(ValueError, match=r"eval.max_generation_steps \(96\) and grpo.*\(80\)"):
        recipes.start(
            recipes.Agentic,
            "smoke",
            tmp_path / "b",
            verbose=False,
            recipe_overrides={"eval.max_generation_steps": 96},
        )
    # tunix's agentic learner has no rollout micro-batch: setting one is refused, not ignored
    with pytest.raises(ValueError, match=r"rollout_micro_batch_size \(2\) is not used"):
        recipes.start(
            recipes.Agentic,
            "smoke",
            tmp_path / "c",
            verbose=False,
            recipe_overrides={"grpo.rollout_micro_batch_size": 2},
        )


def test_agentic_grpo_trains_on_one_device_of_emulated_cpu_devices():
    """agentic.training_mesh: the 2 emulated CPU devices' mesh becomes its first device alone, its
    axes kept (the sampling and training threads' collectives deadlocked on two); a mesh of one
    device and no mesh stay as they are."""
    mesh = runtime.make_mesh()
    assert mesh.devices.size == 2
    one = agentic.training_mesh(mesh)
    assert one.devices.size == 1 and one.axis_names == mesh.axis_names
    assert one.devices.flat[0] == mesh.devices.flat[0]
    assert agentic.training_mesh(one) is one and agentic.training_mesh(None) is None


def test_a_stage_evaluation_is_read_back_for_the_same_questions_and_made_again_for_others(tmp_path):
    """agentic.evaluate_stage: a rerun reads the stored summaries back without loading the model
    (its folder here does not exist), and only for as many questions as were asked before; for
    another number it loads the model again (here: the missing folder, named)."""
    recipe = recipes.Agentic.smoke()
    records = [{"question": f"{i} + 1", "answer": str(i + 1)} for i in range(3)]
    for kind in ("tool", "plain"):
        summary = {"n": 3.0, "accuracy": 0.5 if kind == "tool" else 0.25}
        (tmp_path / f"tool_before_{kind}.json").write_text(json.dumps(summary))
    missing = tmp_path / "no_model"
    got = agentic.evaluate_stage(missing, records, recipe, label="before", output_dir=tmp_path)
    assert got == {
        "before, tool": {"n": 3.0, "accuracy": 0.5},
        "before, no tool": {"n": 3.0, "accuracy": 0.25},
    }
    with pytest.raises(FileNotFoundError, match="no_model"):
        agentic.evaluate_stage(missing, records[:2], recipe, label="before", output_dir=tmp_path)
