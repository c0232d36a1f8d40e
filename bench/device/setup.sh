# Sourced by bench/device/run.sh and rehearsal.sh on the lent GPU: installs the carried wheels
# (.whl/) into /tmp/site, puts them, this repository and bench/device/sitecustomize.py on the path,
# and writes the device and JAX version to $OUT/gpu.txt.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="$PWD/bench/device:/tmp/site:$PWD" PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import jax, flax, tunix, grain; print(jax.__version__, jax.devices())" 2>&1 | tail -2 | tee -a "$OUT/gpu.txt"
