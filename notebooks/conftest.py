"""nbval settings for the notebooks: smoke profile, CPU with 4 emulated devices, offline.

Set before any kernel starts, so every notebook kernel inherits them.
"""

import os

os.environ["TUNIXKIT_PROFILE"] = "smoke"
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["WANDB_MODE"] = "disabled"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
