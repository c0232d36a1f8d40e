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
