"""Adapters routed by domain (tunixkit.routing, notebook 09): adapters trained one after another
on one LoRA module from the same start, swapped in place with the base untouched, the merged
checkpoint's update the weighted sum of theirs, the routers measured, and a routed evaluation
answering each prompt with its adapter."""

import dataclasses

import jax
import numpy as np
import pytest
from flax import nnx

from tunixkit import (
    data,
    domains,
    evaluation,
    judging,
    models,
    prompting,
    routing,
    runtime,
    testing,
)

ROUTES = {"math": ["math"], "writing": ["creative", "ideation", "summarization", "science", "code"]}
GREEDY = dataclasses.replace(evaluation.EvalConfig.smoke(), max_generation_steps=16, batch_size=8)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    mesh = runtime.make_mesh()
    base = models.load_model("tiny-gemma3-sft", mesh=mesh, verbose=False)
    rows = [t.record() for t in testing.synthetic_tasks(60, seed=5)]

    def pairs(domains_):
        return [
            (prompting.format_prompt(r["prompt"], None), r["response"])
            for r in rows
            if r["domain"] in domains_
        ]

    prompts = [prompting.format_prompt(r["prompt"], None) for r in rows[:6]]
    before = [g.text for g in evaluation.generate(base, prompts, GREEDY, progress=False)]
    lora, adapters, runs = routing.train_adapters(
        base,
        {name: pairs(ds) for name, ds in ROUTES.items()},
        tmp_path_factory.mktemp("adapters"),
        rank=4,
        alpha=8.0,
        steps={"math": 6, "writing": 6},
        learning_rate=1e-2,
        batch_size=4,
        max_len=96,
        mesh=mesh,
    )
    return base, lora, adapters, runs, rows, prompts, before


def _answers(base, model, prompts):
    view = dataclasses.replace(base, model=model)
    return [g.text for g in evaluation.generate(view, prompts, GREEDY, progress=False)]


def test_each_adapter_trains_from_the_same_start_and_swaps_in_place(trained):
    base, lora, adapters, runs, _, prompts, before = trained
    assert {n: r.trained for n, r in runs.items()} == {"math": 6, "writing": 6}
    a, b = (jax.tree.leaves(adapters[n]) for n in ROUTES)
    assert any(not np.allclose(x, y) for x, y in zip(a, b, strict=True))  # two adapters
    swap = routing.Swapper(lora, adapters)
    swap("math")
    math_answers = _answers(base, lora, prompts)
    swap("writing")
    writing_answers = _answers(base, lora, prompts)
    swap("math")
    assert _answers(base, lora, prompts) == math_answers != writing_answers  # in place, exact
    assert len(swap.seconds) == 3 and swap.current == "math"
    assert _answers(base, base.model, prompts) == before  # the base itself never changed


def test_the_merged_update_is_the_weighted_sum_of_the_adapters(trained):
    base, lora, adapters, _, _, prompts, _ = trained
    weights = {"math": 0.3, "writing": 0.7}
    merged = routing.merge(base, adapters, weights, rank=4, alpha=8.0)
    big = nnx.state(merged, nnx.LoRAParam)
    down = {n: adapters[n]["layers"][0]["mlp"]["down_proj"] for n in ROUTES}
    want = sum(
        weights[n]
        * np.asarray(down[n]["kernel_lora_a"].value)
        @ np.asarray(down[n]["kernel_lora_b"].value)
        for n in ROUTES
    )
    got = big["layers"][0]["mlp"]["down_proj"]
    product = np.asarray(got["kernel_lora_a"].value) @ np.asarray(got["kernel_lora_b"].value)
    np.testing.assert_allclose(product, want, rtol=1e-5, atol=1e-6)
    # one adapter at weight 1 and the other at 0: that adapter's answers exactly
    only = routing.merge(base, adapters, {"math": 1.0, "writing": 0.0}, rank=4, alpha=8.0)
    routing.Swapper(lora, adapters)("math")
    assert _answers(base, only, prompts) == _answers(base, lora, prompts)


def test_the_learned_router_routes_what_the_keywords_miss():
    records = [t.record() for t in testing.synthetic_tasks(600, seed=0)]
    heldout, train = domains.split_heldout(records, 10)
    learned = routing.Router.fit(train, ROUTES)
    keywords = routing.router_accuracy(heldout, ROUTES, lambda p: routing.route(p, ROUTES))
    routed = routing.router_accuracy(heldout, ROUTES, learned)
    assert routed["all"]["accuracy"] == 1.0, routed
    # the synthetic science questions ("what does a seed need to grow?") hold no science keyword:
    # the keyword router sends them to the first adapter
    assert keywords["science"]["accuracy"] == 0.0 and keywords["science"]["sent_to"] == {"math": 10}
    assert routed["seconds_per_prompt"] > 0


def test_a_routed_evaluation_answers_each_prompt_with_its_adapter(trained, tmp_path):
    base, lora, adapters, _, rows, _, _ = trained
    made = testing.synthetic_tasks(12, seed=9)
    tasks = [t.record() for t in made]
    judge = judging.Judge(testing.rubric_grader(made), name="judge")
    swap = routing.Swapper(lora, adapters)
    view = dataclasses.replace(base, model=lora)
    pick = routing.Router.fit(rows, ROUTES)
    routed = domains.evaluate(
        view,
        tasks,
        judge,
        name="routed",
        config=GREEDY,
        output_dir=tmp_path,
        route=lambda t: pick(t["prompt"]),
        use=swap,
    )
    assert swap.current is not None and len(swap.seconds) == 2  # one swap per adapter
    answered = [r["completion"] for r in data.read_rows(tmp_path / "domains_routed.jsonl")]
    for name in ROUTES:  # each prompt's answer is its adapter's, in the tasks' order
        swap(name)
        mine = [i for i, t in enumerate(tasks) if pick(t["prompt"]) == name]
        prompts = [view.chat.prompt(tasks[i]["prompt"], GREEDY.system_prompt) for i in mine]
        assert [answered[i] for i in mine] == _answers(base, lora, prompts)
    assert routed.rows["all"]["n"] == len(tasks)
