"""``python -m tunixkit.testing MODEL_ID FOLDER``: build a smoke model (what :func:`materialize`
runs in a process of its own).

``JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=1 python -m tunixkit.testing
--write-warm-start``: train the warm start and write the shipped weights
(:func:`tunixkit.testing.write_warm_start`)."""

import pathlib
import sys

from tunixkit.testing._tiny import _build, write_warm_start

if sys.argv[1:] == ["--write-warm-start"]:
    print(write_warm_start())
else:
    _build(sys.argv[1], pathlib.Path(sys.argv[2]))
