"""``python -m tunixkit.testing MODEL_ID FOLDER``: build a smoke model (what :func:`materialize`
runs in a process of its own)."""

import pathlib
import sys

from tunixkit.testing._tiny import _build

_build(sys.argv[1], pathlib.Path(sys.argv[2]))
