"""The notebooks' install cell, as the competition host re-runs it weeks later: in a Python without
tunixkit it clones the repository and installs the release the notebook names (``TUNIXKIT_RELEASE``,
written by ``scripts/release.py``), not the repository's newest commit."""

import os
import pathlib
import re
import subprocess

import pytest

from tunixkit import testing

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))


def _install_cell(notebook: pathlib.Path) -> str:
    """The notebook's first code cell (the install cell), as a script."""
    cells = re.split(r"^# %%.*$", notebook.read_text(), flags=re.M)
    cell = next(c for c in cells[1:] if "TUNIXKIT_RELEASE" in c)
    return cell + "\nimport tunixkit\nprint('installed', tunixkit.__version__)\n"


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """A clone of this repository's HEAD, tagged as the notebooks' release, with a newer commit
    on top that the install must not take."""
    repo = tmp_path_factory.mktemp("remote") / "tunixkit"
    _git("clone", "-q", str(ROOT), str(repo), cwd=ROOT)
    release = re.search(r'"TUNIXKIT_RELEASE", "(v[^"]+)"', NOTEBOOKS[0].read_text())[1]
    _git("tag", "-f", release, cwd=repo)
    init = repo / "tunixkit" / "__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]+"', '__version__ = "9.9.9"', init.read_text()))
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "newer", cwd=repo)
    return repo


def _run_cell(tmp_path, repo, **env):
    python = testing.kernel_python(tmp_path / "kernel")
    script = tmp_path / "install.py"
    script.write_text(_install_cell(ROOT / "notebooks" / "02_grpo_gsm8k.py"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TUNIXKIT_", "PYTHONPATH"))}
    return subprocess.run(
        [python, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean
        | {
            "TUNIXKIT_SOURCE": f"file://{repo}",
            "TMPDIR": str(tmp_path),
            "KAGGLE_KERNEL_RUN_TYPE": "Batch",
        }
        | env,
    )


def test_every_notebook_pins_the_package_version():
    version = re.search(
        r'^__version__ = "([^"]+)"', (ROOT / "tunixkit/__init__.py").read_text(), re.M
    )[1]
    pins = {
        nb.name: re.findall(r'"TUNIXKIT_RELEASE", "(v[^"]+)"', nb.read_text()) for nb in NOTEBOOKS
    }
    assert pins == {nb.name: [f"v{version}"] for nb in NOTEBOOKS}


def test_a_host_rerun_installs_the_pinned_release_not_the_newest_commit(tmp_path, repository):
    res = _run_cell(tmp_path, repository)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    version = re.search(
        r'^__version__ = "([^"]+)"', (ROOT / "tunixkit/__init__.py").read_text(), re.M
    )[1]
    assert f"installed {version}\n" in res.stdout, res.stdout[-2000:]
    assert "tunixkit doctor" in res.stdout + res.stderr  # the installed tunix was checked


def test_a_release_that_cannot_be_found_says_what_to_do(tmp_path, repository):
    res = _run_cell(tmp_path, repository, TUNIXKIT_RELEASE="v404.0.0")
    assert res.returncode != 0
    assert "tunixkit release 'v404.0.0' is not in file://" in res.stderr, res.stderr[-2000:]
    assert "TUNIXKIT_SOURCE to its folder" in res.stderr
