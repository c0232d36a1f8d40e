"""nbval settings for the notebooks: smoke profile, CPU with 2 emulated devices
(``killing.NOTEBOOK_DEVICES``), offline; and nbval made to keep a long cell's output
(``nbval_drain``: it would drop what passed ZeroMQ's queues, and fail the cell).

Set before any kernel starts, so every notebook kernel inherits them.
"""

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))  # killing.py
import killing  # noqa: E402
import nbval_drain  # noqa: E402, F401

os.environ["TUNIXKIT_PROFILE"] = "smoke"
os.environ["JAX_PLATFORMS"] = "cpu"
# the tests' CPU settings (XLA_FLAGS, PJRT_NPROC: killing.cpu_env) for the notebooks' devices
for key, value in killing.cpu_env(killing.NOTEBOOK_DEVICES).items():
    os.environ.setdefault(key, value)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["WANDB_MODE"] = "disabled"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
