"""The README tells the truth: its quickstart, its CI command and its benchmark table."""

import importlib.util
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _quickstart_commands() -> list[str]:
    section = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the Quickstart section has no ```bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quickstart_is_two_commands_the_main_job_and_the_test_suite():
    run, test = _quickstart_commands()
    assert "notebooks/02_grpo_gsm8k.ipynb" in run and "--run" in run, run
    assert test.endswith("--test"), test


def test_ci_runs_the_readme_test_command():
    test = _quickstart_commands()[1]
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln and ln[0] != "#"]
    assert test in ci, (test, ci)


def test_every_notebook_is_listed():
    for nb in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        assert f"(notebooks/{nb.name})" in README, f"README's notebook table lacks {nb.name}"


def test_bench_table_is_rendered_from_the_results():
    spec = importlib.util.spec_from_file_location(
        "bench_table", ROOT / "scripts" / "bench_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = "\n".join(module.rows())
    written = README.split(module.BEGIN, 1)[1].split(module.END, 1)[0].strip()
    assert written == table.strip(), (
        "README's bench table is stale: python scripts/bench_table.py --write"
    )
    assert len(module.rows()) > 2, "no bench/results/*.json rendered"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_real_model_table_is_rendered_from_its_results():
    """``bench/results/real_270m_cpu.json`` (scripts/real_270m.py, the notebooks run headless on
    the real Gemma 3 270M) is what the README's table says, its figures agree with their own
    counts, and every plot it names is committed."""
    import json

    from tunixkit import stats

    module = _script("real_270m")
    results = json.loads(module.RESULTS.read_text())
    written = README.split(module.BEGIN, 1)[1].split(module.END, 1)[0].strip()
    assert written == module.table(results), (
        "README's real-model table is stale: python scripts/real_270m.py --write"
    )
    assert "01" in results["runs"], "the SFT run on the real model is missing"
    for name, run in results["runs"].items():
        e = run["eval"]
        for tag in ("before", "after"):
            for metric in ("accuracy", "format"):
                r = e[tag][metric]
                assert r["value"] == r["k"] / r["n"], (name, tag, metric)
                assert list(r["ci95"]) == list(stats.wilson_interval(r["k"], r["n"])), name
        pa = e["paired_accuracy"]
        diff = e["after"]["accuracy"]["value"] - e["before"]["accuracy"]["value"]
        assert abs(pa["difference"] - diff) < 1e-9, name
        n = e["after"]["accuracy"]["n"]
        assert abs((pa["only_after"] - pa["only_before"]) / n - diff) < 1e-9, name
        for png in run["plots"]:
            assert (module.PLOTS / png).is_file(), png
