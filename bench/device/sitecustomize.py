"""Only for a lent GPU host whose preinstalled JAX (0.11.2) is newer than tunixkit's pin (0.10.2).

flax 0.12.8 (the pin tunix 0.1.7 is tested with) defines its experimental "hijax" variables at
import time from ``jax.experimental.hijax`` names that JAX 0.11 renamed or removed, so ``import
flax`` fails there. This stand-in gives those names placeholder classes: the import succeeds, and
anything that really uses a hijax variable raises (tunix's models and trainers do not). Put this
folder on ``PYTHONPATH`` only for ``bench/device/run.sh``; nothing in tunixkit imports it.
"""

import jax.experimental.hijax as h


class _Stub:
    def __init__(self, *a, **k):
        self.name = a[0] if a else None

    def __getattr__(self, name):
        raise AttributeError(f"jax 0.11 shim: {name} (flax hijax variables are not supported here)")


for name in ("HiPrimitive", "MutableHiType", "AvalQDD", "AvalMutableQDD"):
    if not hasattr(h, name):
        setattr(h, name, type(name, (_Stub,), {}))
