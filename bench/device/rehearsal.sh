#!/usr/bin/env bash
# 06's rehearsal at the real shapes on a lent GPU (bench/device/rehearsal.py says what it runs), in
# one call of the `device` tool with carry [".whl"] (the wheels run.sh lists; SFT batches are
# grain datasets, so grain and its two needs are among them):
#   bash bench/device/rehearsal.sh
# Results land in $OUT: rehearsal.json (the projected 9-hour run), rehearsal.log (what the notebook
# printed), recipe.json, gpu.txt. LIMIT_S (default 420) stops the notebook in time to send them;
# NOTEBOOK=01 rehearses 01_qlora_sft instead (on prompt/response traces).
set -uo pipefail
source bench/device/setup.sh  # wheels, paths, $OUT/gpu.txt
JAX_PLATFORMS=cpu XLA_FLAGS="--xla_gpu_autotune_level=0" python3 bench/device/rehearsal.py \
  --work /tmp/rehearsal --out "$OUT" --limit-s "${LIMIT_S:-420}" --platform cuda \
  --notebook "${NOTEBOOK:-06}" 2>&1 | tail -c 200000 > "$OUT/driver.log"
tail -c 3000 "$OUT/driver.log"
ls -la "$OUT"
