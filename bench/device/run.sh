#!/usr/bin/env bash
# Real shapes on a lent GPU (random or abstract weights), in one call of the `device` tool:
#   1. bench/memory_plan.py --accelerator: every one-device plan (01-04's one-chip presets, 06's
#      stages with the judge resident, the Gemma2 variants) compiled for the GPU itself;
#   2. bench/sft_step.py at 01's one-chip shape (gemma-3-1b, 4 x 512, rank 64): the peak memory a
#      real step allocates, beside the plan's compiled figure for the same program.
# The host has JAX 0.11.2 with CUDA and no network: the pinned pure-Python packages travel as wheels
# in .whl/ (git-ignored; ~12 MB), and bench/device/sitecustomize.py bridges flax 0.12.8 to JAX 0.11.
# Results land in $OUT (copy memplan_gpu.json and sft_step_gpu.json to bench/results/). Make .whl/
# here first, then call the device tool with carry [".whl"] and `bash bench/device/run.sh`:
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 --platform any -d .whl google-tunix==0.1.7 qwix==0.1.8 \
#     flax==0.12.8 optax==0.2.8 orbax-checkpoint==0.12.8 google_metrax==0.2.4 clu==0.0.12 \
#     tensorboardX==2.6.5 perfetto==0.59.1 ipython==9.18.1 traitlets==5.16.1 dill==0.4.1 \
#     pytz==2026.6 treescope==0.1.10 etils==1.15.0 humanize==4.17.0 googleapis-common-protos==1.76.0 \
#     jedi==0.20.1 parso==0.8.7 pexpect==4.9.0 ptyprocess==0.7.0 prompt_toolkit==3.0.53 \
#     wcwidth==0.9.4 asttokens==3.0.2 executing==2.3.0 pure_eval==0.2.4 matplotlib-inline==0.2.2 \
#     ipython_pygments_lexers==1.1.1 decorator stack_data grain==0.2.18 array_record==0.8.6 \
#     portpicker==1.6.0
set -uo pipefail
source bench/device/setup.sh  # wheels, paths, $OUT/gpu.txt
# Rechecks beside the plans: each line of $RECHECKS (a file) is `memplan` arguments, e.g.
# "agentic --devices 1 --preset one_chip --set batch_size=2"; rows go to $OUT/rechecks.jsonl.
if [ -n "${RECHECKS:-}" ]; then
  while read -r args; do
    [ -z "$args" ] && continue
    # shellcheck disable=SC2086
    XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_FLAGS="--xla_gpu_autotune_level=0" timeout "${PLAN_S:-300}" \
      python3 -m tunixkit.tools.memplan $args --json "$OUT/rechecks.jsonl" >> "$OUT/rechecks.log" 2>&1 &
  done < "$RECHECKS"
fi
XLA_FLAGS="--xla_gpu_autotune_level=0" timeout "${PLAN_S:-300}" python3 bench/memory_plan.py --accelerator --jobs "${JOBS:-8}" 2>&1 | tee "$OUT/memplan.log"
cp bench/results/memplan_gpu.json "$OUT/" 2>/dev/null
wait
if [ "${SFT_STEP:-1}" = 1 ]; then  # SFT_STEP=0: the plans only
  XLA_PYTHON_CLIENT_PREALLOCATE=false timeout "${STEP_S:-120}" python3 bench/sft_step.py --shape gemma-3-1b \
    --batch 4 --seq 512 --rank 64 --steps 10 --out sft_step_gpu.json 2>&1 | tee "$OUT/sft_step.log"
  cp bench/results/sft_step_gpu.json "$OUT/" 2>/dev/null
fi
ls -la "$OUT"
