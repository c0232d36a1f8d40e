"""The notebooks' install cell, as the competition host re-runs it weeks later: in a Python without
tunixkit it clones the repository as it lands (no tag) and installs the commit the notebook names
(``TUNIXKIT_RELEASE``, written by ``scripts/release.py``), not the repository's newest commit; that
commit's library is the one under test, and it holds every module the notebooks import."""

import ast
import importlib.util
import os
import pathlib
import re
import shutil
import stat
import subprocess

import pytest

from tunixkit import runtime, testing

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))
_spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
release = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(release)


def _install_cell(notebook: pathlib.Path, imports: str = "") -> str:
    """The notebook's first code cell (the install cell), as a script; then ``imports``."""
    cells = re.split(r"^# %%.*$", notebook.read_text(), flags=re.M)
    cell = next(c for c in cells[1:] if "TUNIXKIT_RELEASE" in c)
    return (
        f"{cell}\n{imports}\nfrom tunixkit import runtime\nprint('installed', runtime.code_id())\n"
    )


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _pin() -> str:
    """The commit every notebook's install cell names (one for all)."""
    pins = {
        nb.name: re.findall(r'"TUNIXKIT_RELEASE", "([^"]+)"', nb.read_text()) for nb in NOTEBOOKS
    }
    assert len({tuple(p) for p in pins.values()}) == 1 and all(
        len(p) == 1 for p in pins.values()
    ), pins
    return next(iter(pins.values()))[0]


def _tunixkit_imports() -> str:
    """Every ``import``/``from`` statement of the notebooks that names tunixkit, as a script."""
    found = set()
    for nb in NOTEBOOKS:
        for node in ast.walk(ast.parse(nb.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tunixkit"):
                found.add(ast.unparse(node))
            elif isinstance(node, ast.Import) and any(
                a.name.startswith("tunixkit") for a in node.names
            ):
                found.add(ast.unparse(node))
    return "\n".join(sorted(found))


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """A clone of this repository as it lands (no tag added: the pin is a commit), with a newer
    commit on top that the install must not take."""
    repo = tmp_path_factory.mktemp("remote") / "tunixkit"
    _git("clone", "-q", str(ROOT), str(repo), cwd=ROOT)
    for tag in subprocess.run(
        ["git", "tag"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.split():
        _git("tag", "-d", tag, cwd=repo)
    init = repo / "tunixkit" / "__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]+"', '__version__ = "9.9.9"', init.read_text()))
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "newer", cwd=repo)
    return repo


def _run_cell(tmp_path, repo, imports="", source=None, **env):
    python = testing.kernel_python(tmp_path / "kernel")
    script = tmp_path / "install.py"
    script.write_text(_install_cell(ROOT / "notebooks" / "02_grpo_gsm8k.py", imports))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TUNIXKIT_", "PYTHONPATH"))}
    return subprocess.run(
        [python, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean
        | {
            "TUNIXKIT_SOURCE": source or f"file://{repo}",
            "TMPDIR": str(tmp_path),
            "KAGGLE_KERNEL_RUN_TYPE": "Batch",
        }
        | env,
    )


def test_every_notebook_pins_the_commit_of_the_library_under_test():
    """The pin names a commit of this repository whose library (what the install cell installs) is
    the working tree's: the code these tests and the notebooks' CI runs check is the code a
    host's re-run installs. After any change to it: python scripts/release.py, then commit."""
    pin = _pin()
    assert re.fullmatch(r"[0-9a-f]{40}", pin), f"the pin {pin!r} is not a commit"
    found = subprocess.run(["git", "cat-file", "-e", f"{pin}^{{commit}}"], cwd=ROOT)
    assert found.returncode == 0, f"the pinned commit {pin} is not in this repository"
    changed = subprocess.run(
        ["git", "diff", "--stat", pin, "--", *release.INSTALLED],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert not changed, (
        f"the library changed since the notebooks' pin {pin[:12]}:\n{changed}\ncommit it, then run "
        "python scripts/release.py and commit the notebooks it pins"
    )


def test_a_host_rerun_installs_the_pinned_commit_with_every_module_the_notebooks_import(
    tmp_path, repository
):
    res = _run_cell(tmp_path, repository, imports=_tunixkit_imports())
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert f"installed {runtime.code_id()}\n" in res.stdout, res.stdout[-2000:]  # not 9.9.9
    assert "tunixkit doctor" in res.stdout + res.stderr  # the installed tunix was checked


def test_a_release_that_cannot_be_found_says_what_to_do(tmp_path, repository):
    res = _run_cell(tmp_path, repository, TUNIXKIT_RELEASE="v404.0.0")
    assert res.returncode != 0
    assert "tunixkit release 'v404.0.0' is not in file://" in res.stderr, res.stderr[-2000:]
    assert "TUNIXKIT_SOURCE to its folder" in res.stderr


def test_with_the_internet_off_a_read_only_attached_copy_installs_without_an_index(tmp_path):
    """The Internet off: the repository attached as a Kaggle dataset (read-only, under
    /kaggle/input) and no package index. The install builds from a writable copy with the
    kernel's own setuptools (no isolated build environment to download)."""
    attached = tmp_path / "input" / "tunixkit"
    shutil.copytree(
        ROOT,
        attached,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "runs", "__pycache__", ".ci-reports", "*.egg-info", "build"
        ),
    )
    for p in [attached, *attached.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        res = _run_cell(
            tmp_path, attached, source=str(attached), PIP_NO_INDEX="1", PIP_FIND_LINKS=""
        )
    finally:
        for p in [attached, *attached.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert f"installed {runtime.code_id()}\n" in res.stdout, res.stdout[-2000:]
    # nothing written into the attached copy (tests run as root: the read-only bits do not stop it)
    assert not list(attached.rglob("*.egg-info")) and not (attached / "build").exists()
