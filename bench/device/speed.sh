#!/usr/bin/env bash
# Issue 50's figures at real shapes on a lent GPU: bench/speed.py on gemma-3-1b (random weights at
# the real shape and vocabulary), in two calls of the `device` tool that each fit in 4 minutes, with
# carry [".whl"] (the wheels bench/device/run.sh lists):
#   CALL=1 bash bench/device/speed.sh   # bandwidth, bf16 matmul peak, decode at batch 1/8/32/128
#   CALL=2 bash bench/device/speed.sh   # 02's GRPO step by phase with peaks, SFT MFU, the plans,
#                                       # the v5e-8 projection
# Every part writes $OUT/speed_gpu.json as it finishes (a call cut short keeps what it measured);
# call 2 needs call 1's file back in bench/results/speed_gpu.json (copy it from the first call's
# files), since the projection reads its bandwidth and matmul figures. Copy the second call's
# file to bench/results/ as well and commit it.
set -uo pipefail
source bench/device/setup.sh  # wheels, paths, $OUT/gpu.txt
export XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_FLAGS="--xla_gpu_autotune_level=0"
file=bench/results/speed_gpu.json
case "${CALL:-1}" in
  1) timeout "${LIMIT_S:-220}" python3 bench/speed.py --model gemma-3-1b --out "$file" \
       --parts bandwidth,matmul,decode --batches 1,8,32,128 --prompt 256 --new 192 2>&1 | tee "$OUT/speed1.log" ;;
  2) timeout "${LIMIT_S:-220}" python3 bench/speed.py --model gemma-3-1b --out "$file" --resume \
       --parts grpo,sft,plan,projection 2>&1 | tee "$OUT/speed2.log" ;;
esac
cp "$file" "$OUT/" 2>/dev/null
ls -la "$OUT"
