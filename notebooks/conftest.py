"""nbval settings for the notebooks: smoke profile, CPU with 4 emulated devices, offline.

Set before any kernel starts, so every notebook kernel inherits them.
"""

import os

os.environ["TUNIXKIT_PROFILE"] = "smoke"
os.environ["JAX_PLATFORMS"] = "cpu"
# the collectives' wait raised to 10 minutes: why in tests/killing.py's xla_flags
os.environ.setdefault(
    "XLA_FLAGS",
    "--xla_force_host_platform_device_count=4 --xla_cpu_collective_call_terminate_timeout_seconds=600",
)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["WANDB_MODE"] = "disabled"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
