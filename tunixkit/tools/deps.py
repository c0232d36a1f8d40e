"""tunix's own dependencies that this Python lacks, and the one pip line that adds them.

Kaggle and Colab images may carry tunix without some of its requirements. The setup script asks
``python -m tunixkit.tools.deps --pins requirements.txt`` for the line (empty when nothing is
missing) before the doctor imports tunix. It reads installed metadata only, so it answers in well
under a second: importing tunix to find out would take longer than the install.

jax, libtpu and flax are never named: the image's own stay as they are (``--no-deps``).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import pathlib
import re
import sys
from collections.abc import Iterable

__all__ = ["missing_dependencies", "pip_line"]

NEVER_INSTALLED = {"jax", "jaxlib", "libtpu", "flax"}  # the image's own: never touched here


def missing_dependencies(dist: str = "google-tunix") -> list[str]:
    """``dist``'s own requirements (no extras) that are not installed, jax/libtpu/flax excepted."""
    try:
        reqs = md.requires(dist) or []
    except md.PackageNotFoundError:
        return []
    out = []
    for req in reqs:
        if "extra ==" in req:
            continue
        name = re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0]
        if name.lower() in NEVER_INSTALLED:
            continue
        try:
            md.version(name)
        except md.PackageNotFoundError:
            out.append(name)
    return out


def pip_line(names: Iterable[str], pins: pathlib.Path | None = None) -> str:
    """``pip install --no-deps ...`` for ``names``, at the versions pinned in ``pins``.

    >>> pip_line([])
    ''
    >>> pip_line(["jaxtyping", "google_metrax"])
    'pip install --no-deps jaxtyping google_metrax'
    """
    pinned = {}
    if pins is not None and pins.is_file():
        for line in pins.read_text().splitlines():
            if "==" in line and not line.startswith("#"):
                pinned[re.sub(r"[-_.]+", "-", line.split("==")[0]).lower()] = line.strip()
    names = [pinned.get(re.sub(r"[-_.]+", "-", n).lower(), n) for n in names]
    return "pip install --no-deps " + " ".join(names) if names else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Print the pip line for tunix's missing dependencies (empty if none)."
    )
    ap.add_argument(
        "--pins", type=pathlib.Path, help="requirements.txt whose versions the pip line uses"
    )
    args = ap.parse_args(argv)
    print(pip_line(missing_dependencies(), args.pins))
    return 0


if __name__ == "__main__":
    sys.exit(main())
