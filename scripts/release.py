"""Write a release's version into the package and every notebook's install cell.

    python scripts/release.py 0.3.0

sets ``version`` in pyproject.toml, ``tunixkit.__version__`` and ``TUNIXKIT_RELEASE = "v0.3.0"`` in
each ``notebooks/NN_*.py`` (then run ``jupytext --to ipynb --update notebooks/*.py``). Commit, then
tag and push the tag (``git tag v0.3.0 && git push origin v0.3.0``): the notebooks' first cell checks
that tag out, so a re-run months later installs the same code.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RULES = [  # file glob, pattern, replacement (the version goes where {v} is)
    ("pyproject.toml", r'^version = "[^"]+"', 'version = "{v}"'),
    ("tunixkit/__init__.py", r'^__version__ = "[^"]+"', '__version__ = "{v}"'),
    ("notebooks/[0-9]*.py", r'"TUNIXKIT_RELEASE", "v[^"]+"', '"TUNIXKIT_RELEASE", "v{v}"'),
]


def main(version: str) -> None:
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise SystemExit(f"expected a version like 0.3.0, got {version!r}")
    for pattern, regex, repl in RULES:
        for path in sorted(ROOT.glob(pattern)):
            text, n = re.subn(regex, repl.format(v=version), path.read_text(), flags=re.M)
            if n != 1:
                raise SystemExit(f"{path}: expected one match of {regex!r}, found {n}")
            path.write_text(text)
            print(f"{path.relative_to(ROOT)}: {version}")


if __name__ == "__main__":
    main(sys.argv[1])
