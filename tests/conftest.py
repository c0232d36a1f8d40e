"""Test settings: CPU with 2 emulated devices (for mesh code), offline, no W&B."""

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # helpers: killing.py
import killing  # noqa: E402

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ.setdefault("XLA_FLAGS", killing.xla_flags(2))
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
