"""Pin every notebook's install cell to the commit whose library it was tested with.

    python scripts/release.py                  # pin the notebooks to HEAD
    python scripts/release.py --version 0.4.0  # first set the version (then commit, then pin)

The notebooks' first cell clones the repository and checks out ``TUNIXKIT_RELEASE``, so that the
competition host's re-run weeks later installs the code that was tested. A commit resolves in any
clone of the repository, with no tag to push or forget. The pinned commit's library (``tunixkit/``,
``pyproject.toml``, ``requirements.txt``, the setup script, ``install_in_kernel.py`` which the cell
runs: :data:`INSTALLED`) must equal the working tree's, so this refuses while those paths have
changes that are not committed; after it, commit
the notebooks (``jupytext --to ipynb --update notebooks/[0-9]*.py`` first). ``tests/test_install.py``
fails when the library moved on without a new pin, naming this command.
"""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
# what the install cell installs from the pinned commit
INSTALLED = (
    "tunixkit",
    "pyproject.toml",
    "requirements.txt",
    "setup_notebook_tpu_single_host.sh",
    "install_in_kernel.py",
)
PIN = re.compile(r'"TUNIXKIT_RELEASE", "([^"]+)"')
VERSION_RULES = [  # file, pattern, replacement (the version goes where {v} is)
    ("pyproject.toml", r'^version = "[^"]+"', 'version = "{v}"'),
    ("tunixkit/__init__.py", r'^__version__ = "[^"]+"', '__version__ = "{v}"'),
]


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def notebooks() -> list[pathlib.Path]:
    return sorted((ROOT / "notebooks").glob("[0-9]*.py"))


def pinned() -> set[str]:
    """The commits the notebooks' install cells name."""
    return {m for nb in notebooks() for m in PIN.findall(nb.read_text())}


def set_version(version: str) -> None:
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise SystemExit(f"expected a version like 0.3.0, got {version!r}")
    for name, regex, repl in VERSION_RULES:
        path = ROOT / name
        text, n = re.subn(regex, repl.format(v=version), path.read_text(), flags=re.M)
        if n != 1:
            raise SystemExit(f"{path}: expected one match of {regex!r}, found {n}")
        path.write_text(text)
        print(f"{name}: {version}")
    print("now commit, then run: python scripts/release.py")


def pin() -> str:
    if git("status", "--porcelain", "--", *INSTALLED):
        raise SystemExit(
            f"commit the changes to {', '.join(INSTALLED)} first: the pin must name a commit "
            "that holds them"
        )
    commit = git("rev-parse", "HEAD")
    for path in notebooks():
        text, n = PIN.subn(f'"TUNIXKIT_RELEASE", "{commit}"', path.read_text())
        if n != 1:
            raise SystemExit(f"{path}: expected one TUNIXKIT_RELEASE pin, found {n}")
        path.write_text(text)
    print(f"{len(notebooks())} notebooks pinned to {commit}; now run")
    print(
        "  jupytext --to ipynb --update notebooks/[0-9]*.py && git commit -am 'Pin the notebooks'"
    )
    return commit


if __name__ == "__main__":
    if sys.argv[1:2] == ["--version"]:
        set_version(sys.argv[2])
    elif len(sys.argv) == 1:
        pin()
    else:
        raise SystemExit(__doc__)
