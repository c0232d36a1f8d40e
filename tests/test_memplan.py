"""The memory plan at reduced shape: 2 layers of the real gemma-3-1b config on 8 emulated devices.

Each plan runs in its own process: the emulated device count is fixed before JAX starts. The full
shapes are in bench/results/memplan.json (bench/memory_plan.py).
"""

import json
import os
import subprocess
import sys
import types

import pytest

from tunixkit import judging, recipes, runtime
from tunixkit.tools import memplan


def _plan(tmp_path, *args, devices=8):
    out = tmp_path / "plan.jsonl"
    env = dict(
        os.environ,
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        JAX_PLATFORMS="cpu",
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tunixkit.tools.memplan",
            *args,
            "--devices",
            str(devices),
            "--layers",
            "2",
            "--json",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text().splitlines()[-1]), proc


def test_sft_plan_counts_the_sharded_state(tmp_path):
    plan, proc = _plan(tmp_path, "sft", "--set", "batch_size=8", "max_len=128")
    (step,) = plan["steps"]
    assert step["name"] == "sft_update" and plan["devices"] == 8
    state = sum(
        plan["persistent"].values()
    )  # QLoRA: nf4 backbone + adapters + AdamW, one shard each
    assert state <= step["argument"] <= state + 2**20  # the arguments are that state and the batch
    assert step["alias"] > 0  # the optimizer state is donated
    assert (
        0 < plan["peak"] < 16 * 2**30
        and "fits a v5e chip with" in proc.stdout
        and proc.returncode == 0
    )


def test_grpo_plan_has_every_step_and_says_what_to_turn_down(tmp_path):
    plan, proc = _plan(
        tmp_path, "grpo", "--set", "grpo.batch_size=4", "grpo.micro_batch_size=4", "--chip", "v2"
    )
    names = [s["name"] for s in plan["steps"]]
    assert names == ["rollout_prefill", "rollout_decode", "reference_logps", "grpo_update"]
    assert {"backbone", "lora", "optimizer", "reference"} <= set(plan["persistent"])
    # 16 rollout rows of 1,024 tokens: the update's [rows, length, vocab] logits exceed a TPU v2's 8 GiB
    assert plan["spare_gib"] < 0 and proc.returncode == 1
    assert "exceeds a v2 chip" in proc.stdout and "micro_batch_size" in proc.stdout


def test_unknown_chip_model_or_kind_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown chip 'v4'; known: v5e \(16 GiB\)"):
        memplan.plan("sft", chip="v4")
    with pytest.raises(
        ValueError, match="unknown recipe kind 'ppo'; known: sft, dpo, distill, grpo"
    ):
        memplan.plan("ppo")
    with pytest.raises(KeyError, match="Unknown model id 'gemma-7b'. Supported:"):
        memplan.plan("sft", model_id="gemma-7b")


def test_sharding_constraints_are_restored():
    from tunix.utils import sharding_utils

    original = sharding_utils.shard
    with memplan.sharding_constraints(runtime.make_mesh()):
        assert sharding_utils.shard is not original
    assert sharding_utils.shard is original


def test_the_notebooks_check_skips_cpu_and_unknown_chips(capsys):
    assert memplan.check("sft", recipes.SFT.smoke(), runtime.make_mesh()) is None
    assert "memory plan: skipped on cpu" in capsys.readouterr().out
    assert [
        memplan.chip_of(k)
        for k in ("TPU v5 lite", "TPU v6 lite", "TPU v3", "NVIDIA H200", "TPU v4")
    ] == ["v5e", "v6e", "v3", "h200", None]


def test_a_plan_that_does_not_fit_stops_before_the_weights_load(monkeypatch, capsys):
    step = memplan.StepReport(
        "grpo_update",
        "8 x 1024",
        argument=20 * memplan.GIB,
        output=0,
        temp=0,
        alias=0,
        code=0,
        resident_other=0,
        compile_s=1.0,
    )
    found = memplan.Plan("grpo", "gemma-3-1b-it", "v5e", 8, "tpu", {}, [step])
    monkeypatch.setattr(memplan, "plan", lambda *a, **k: found)
    device = types.SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")
    mesh = types.SimpleNamespace(devices=types.SimpleNamespace(flat=[device]))
    with pytest.raises(
        memplan.DoesNotFit, match=r"does not fit a v5e chip: 20.0 GiB .*try .*TUNIXKIT_MEMPLAN=warn"
    ):
        memplan.check("grpo", None, mesh)
    monkeypatch.setenv("TUNIXKIT_MEMPLAN", "warn")
    assert memplan.check("grpo", None, mesh) is found  # asked to go on: prints only
    assert "does not fit" in capsys.readouterr().out


def test_pipeline_plan_covers_every_stage_with_the_judge_resident(tmp_path):
    _plan(
        tmp_path,
        "pipeline",
        "--set",
        "batch_size=2",
        "max_len=128",
        "max_response_length=32",
        "grpo.max_prompt_length=64",
        "grpo.max_generation_steps=32",
        "grpo.batch_size=2",
        "grpo.micro_batch_size=2",
    )
    plans = [json.loads(line) for line in (tmp_path / "plan.jsonl").read_text().splitlines()]
    assert [p["stage"] for p in plans] == ["sft", "improve", "preference", "grpo"]
    assert [p["kind"] for p in plans] == ["sft", "sft", "dpo", "grpo"]
    judge = plans[0]["persistent"]["judge"]
    assert all(p["persistent"]["judge"] == judge for p in plans)
    # the judge is the policy's own model id here: its bytes, read from its abstract weights, are
    # the LoRA stages' backbone, read from the stage's model less its adapters
    assert judge == plans[2]["persistent"]["backbone"] > 0
    # counted once in every step: SFT holds nothing else; GRPO's update also holds the reference
    assert [s["resident_other"] for s in plans[0]["steps"]] == [judge]
    grpo, update = plans[3], plans[3]["steps"][-1]
    assert update["name"] == "grpo_update"
    assert update["resident_other"] == grpo["persistent"]["reference"] + judge
    names = [s["name"] for p in plans for s in p["steps"]]
    assert "simpo_update" in names and "rollout_decode" in names  # 06's full recipe: SimPO
    # GRPO's judge rewards: the judge's own pass at its batch and prompt limit, beside GRPO's
    # whole state (its weights are the pass's arguments, not counted twice)
    steps = {s["name"]: s for s in grpo["steps"]}
    assert list(steps) == [
        "rollout_prefill",
        "rollout_decode",
        "reference_logps",
        "judge_score",
        "grpo_update",
    ]
    rows, length = judging.JUDGE_BATCH, judging.JUDGE_PROMPT_LENGTH
    assert steps["judge_score"]["shapes"] == f"{rows} rows, prompt {length}"
    held = sum(v for k, v in grpo["persistent"].items() if k != "judge")
    assert steps["judge_score"]["resident_other"] == held
    # its arguments: its weights and the token ids and mask (16 rows x 2,048, int32 and bool, over
    # 8 devices: 20 KB); no KV cache, and only the last position's logits (16 x 10 out)
    assert judge < steps["judge_score"]["argument"] < judge + 2**16
    assert steps["judge_score"]["output"] <= rows * len(judging.SCORE_DIGITS) * 4


def test_the_one_chip_preset_of_06_is_planned_as_it_trains(tmp_path):
    # Colab's one chip: Pipeline.one_chip() built and compiled on one device through the plan's
    # own path, its shapes cut; the knobs that make it fit are the ones its steps hold
    one = recipes.Pipeline.one_chip()
    _plan(
        tmp_path,
        "pipeline",
        "--preset",
        "one_chip",
        "--stage",
        "sft",
        "preference",
        "grpo",
        "--set",
        "max_len=128",
        "max_response_length=32",
        "grpo.max_prompt_length=64",
        "grpo.max_generation_steps=32",
        devices=1,
    )
    plans = {
        p["stage"]: p for p in map(json.loads, (tmp_path / "plan.jsonl").read_text().splitlines())
    }
    assert list(plans) == ["sft", "preference", "grpo"]
    assert all(p["devices"] == 1 and "judge" in p["persistent"] for p in plans.values())
    sft, simpo, grpo = (plans[s]["steps"][-1] for s in plans)
    # SFT at its own rank, the stages after it at the preset's lower one: half the adapters
    assert one.sft_lora_rank == 2 * one.lora_rank
    assert sft["shapes"] == f"{one.batch_size}x128 LoRA r{one.sft_lora_rank}"
    lora = [plans[s]["persistent"]["lora"] for s in plans]
    assert lora[0] == 2 * lora[1] == 2 * lora[2]
    assert simpo["name"] == "simpo_update"
    assert simpo["shapes"] == f"{2 * one.preference_batch_size}x(64+32) LoRA r{one.lora_rank}"
    # GRPO's update holds micro-batch x G rows, accumulated over the step's prompts
    g = one.grpo
    rows, acc = g.micro_batch_size * g.num_generations, g.batch_size // g.micro_batch_size
    assert grpo["name"] == "grpo_update"
    assert grpo["shapes"] == f"{rows}x(64+32) LoRA r{one.lora_rank}, grad-acc {acc}"
    assert (rows, acc) == (2, 4)  # what the TPU's compiler fitted (docs/memory.md)


def test_a_stage_that_does_not_fit_stops_06_naming_it_and_its_knobs(monkeypatch, capsys):
    def plans(rec, **kw):
        out = {}
        for stage, gib in (("sft", 8), ("grpo", 20)):
            step = memplan.StepReport("x", "", gib * memplan.GIB, 0, 0, 0, 0, 0, 1.0)
            out[stage] = memplan.Plan("grpo", "gemma-3-1b-it", "v5e", 8, "tpu", {}, [step], stage)
        return out

    monkeypatch.setattr(memplan, "plan_stages", plans)
    device = types.SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")
    mesh = types.SimpleNamespace(devices=types.SimpleNamespace(flat=[device]))
    with pytest.raises(memplan.DoesNotFit, match=r"grpo: 5\.6 GiB short, turn down grpo\.micro"):
        memplan.check_stages(None, mesh)
    assert "stage sft (grpo) on gemma-3-1b-it: fits" in capsys.readouterr().out


def test_a_resumed_run_plans_only_the_stages_it_has_still_to_do(monkeypatch, capsys):
    asked = []

    def plans(rec, **kw):
        asked.append(kw["stages"])
        return {}

    monkeypatch.setattr(memplan, "plan_stages", plans)
    device = types.SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")
    mesh = types.SimpleNamespace(devices=types.SimpleNamespace(flat=[device]))
    assert memplan.check_stages(None, mesh, stages=["grpo"]) == {} and asked == [["grpo"]]
    assert memplan.check_stages(None, mesh, stages=[]) == {} and asked == [["grpo"]]
    assert "every stage is done, none to plan" in capsys.readouterr().out
    memplan.check_stages(None, mesh)
    assert asked[-1] is None  # every stage


def test_a_judge_pass_that_does_not_fit_names_the_judges_batch(monkeypatch):
    def plans(rec, **kw):
        steps = [
            memplan.StepReport(name, "", gib * memplan.GIB, 0, 0, 0, 0, 0, 1.0)
            for name, gib in (("grpo_update", 12), ("judge_score", 20))
        ]
        return {"grpo": memplan.Plan("grpo", "gemma-3-1b-it", "v5e", 1, "tpu", {}, steps, "grpo")}

    monkeypatch.setattr(memplan, "plan_stages", plans)
    device = types.SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")
    mesh = types.SimpleNamespace(devices=types.SimpleNamespace(flat=[device]))
    with pytest.raises(memplan.DoesNotFit, match=r"grpo: 5\.6 GiB short, turn down the judge's b"):
        memplan.check_stages(None, mesh)


def test_agentic_plan_samples_each_turn_from_the_conversation_so_far(tmp_path):
    # 07: a warm start and agentic GRPO, no judge. A turn's prompt is the first prompt plus the
    # episode's tokens so far, in the cache agentic.build gives the sampler.
    _plan(
        tmp_path,
        "agentic",
        "--set",
        "batch_size=2",
        "max_len=128",
        "grpo.max_prompt_length=64",
        "grpo.max_generation_steps=32",
        "grpo.batch_size=2",
        "grpo.micro_batch_size=1",
        "grpo.num_generations=2",
        "--chip",
        "v2",
    )
    plans = [json.loads(line) for line in (tmp_path / "plan.jsonl").read_text().splitlines()]
    assert [(p["stage"], p["kind"]) for p in plans] == [("sft", "sft"), ("grpo", "grpo")]
    assert all("judge" not in p["persistent"] for p in plans)
    prefill = plans[1]["steps"][0]
    assert prefill["name"] == "rollout_prefill"
    # 2 episodes a forward; turn prompt 64 + 32; cache 2 x 64 + 32 + 16
    assert prefill["shapes"] == "2 rows, prompt 96, cache 176"
    assert plans[1]["steps"][-1]["shapes"].startswith("2x(64+32)")


def test_a_stage_that_does_not_fit_stops_07_naming_its_own_knobs(monkeypatch):
    def plans(rec, **kw):
        step = memplan.StepReport("x", "", 20 * memplan.GIB, 0, 0, 0, 0, 0, 1.0)
        found = memplan.Plan("grpo", "gemma-3-1b-it", "v5e", 1, "tpu", {}, [step], "grpo", "07")
        return {"grpo": found}

    monkeypatch.setattr(memplan, "plan_stages", plans)
    device = types.SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")
    mesh = types.SimpleNamespace(devices=types.SimpleNamespace(flat=[device]))
    with pytest.raises(memplan.DoesNotFit, match=r"grpo\.max_generation_steps \(the episode") as e:
        memplan.check_stages(recipes.Agentic.one_chip(), mesh)
    assert "judge" not in str(e.value) and "GENERATION_STEPS" not in str(e.value)


def test_a_tpu_slice_without_libtpu_or_with_a_bad_name_says_what_to_do():
    # CI has no libtpu: the compile-only devices are refused with the install line; a name that is
    # not '<chip>:<x>x<y>' is refused before libtpu is asked
    with pytest.raises(ValueError, match=r"expected '<chip>:<x>x<y>'.*'v5e:2x4'"):
        memplan.tpu_slice_mesh("v5litepod-8")
    import importlib.util

    if importlib.util.find_spec("libtpu") is not None:  # a host with libtpu: the slice is there
        assert memplan.tpu_slice_mesh("v5e:2x4").devices.size == 8
        return
    with pytest.raises(RuntimeError, match=r"pip install 'libtpu==0\.0\.42\.\*'"):
        memplan.tpu_slice_mesh("v5e:2x4")


def test_one_stage_can_be_planned_alone_and_an_unknown_one_is_named():
    with pytest.raises(ValueError, match=r"unknown stages \['prefs'\]; known: sft, improve, pref"):
        memplan.plan_stages(recipes.Pipeline.smoke(), devices=1, stages=["prefs"])
