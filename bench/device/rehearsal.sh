#!/usr/bin/env bash
# 06's rehearsal at the real shapes on a lent GPU (bench/device/rehearsal.py says what it runs), in
# one call of the `device` tool with carry [".whl"] (the wheels run.sh lists, plus grain==0.2.18,
# array_record==0.8.6 and portpicker==1.6.0: SFT batches are grain datasets):
#   bash bench/device/rehearsal.sh
# Results land in $OUT: rehearsal.json (the projected 9-hour run), rehearsal.log (what the notebook
# printed), recipe.json, gpu.txt. LIMIT_S (default 420) stops the notebook in time to send them;
# NOTEBOOK=01 rehearses 01_qlora_sft instead (on prompt/response traces).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="$PWD/bench/device:/tmp/site:$PWD" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import jax, flax, tunix, grain; print(jax.__version__, jax.devices())" 2>&1 | tail -2 | tee -a "$OUT/gpu.txt"
JAX_PLATFORMS=cpu XLA_FLAGS="--xla_gpu_autotune_level=0" python3 bench/device/rehearsal.py \
  --work /tmp/rehearsal --out "$OUT" --limit-s "${LIMIT_S:-420}" --platform cuda \
  --notebook "${NOTEBOOK:-06}" 2>&1 | tail -c 200000 > "$OUT/driver.log"
tail -c 3000 "$OUT/driver.log"
ls -la "$OUT"
