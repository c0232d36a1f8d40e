"""Test settings: CPU with 2 emulated devices (for mesh code), offline, no W&B."""

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # helpers: killing.py
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["WANDB_MODE"] = "disabled"
os.environ.pop("TUNIXKIT_PROFILE", None)
