"""Test settings: CPU with 2 emulated devices (for mesh code), offline, no W&B."""

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # helpers: killing.py
import killing  # noqa: E402

# this process's XLA settings as its CPU children's: 2 devices, and a thread pool with slack over
# them (PJRT_NPROC): with a pool of one thread per device, a device's part of a program can wait on
# a busy thread past the collectives' limit (an abort in test_compat's eager pass over a 2-device
# mesh, a CI run of 2026-11-28, while the notebooks' stream compiled beside it)
for key, value in killing.cpu_env(2).items():
    os.environ.setdefault(key, value)
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["WANDB_MODE"] = "disabled"
# compiled programs shared by every test process, as CI's scripts/test.sh does (also keeps the
# notebooks' own cache, OUTPUT_DIR/jax_cache, out of the tests' temporary folders)
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    str(pathlib.Path(os.environ.get("TUNIXKIT_CACHE", "~/.cache/tunixkit")).expanduser() / "jax"),
)
os.environ.pop("TUNIXKIT_PROFILE", None)
