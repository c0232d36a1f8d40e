#!/usr/bin/env bash
# Every CI gate, in order: lint and format, the setup script parses, notebook pairs in
# sync, notebooks stripped, unit tests and doctests, then every notebook under nbval on the smoke
# profile. Run via the setup script:
#   bash setup_notebook_tpu_single_host.sh --test
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
t0=$SECONDS
# Compiled XLA programs are cached on disk and shared by every process of the run (the tests start
# many: kill-and-resume, the Kaggle replay, the notebook kernels); a program compiles once.
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-${TUNIXKIT_CACHE:-$HOME/.cache/tunixkit}/jax}"
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0

echo "== gate 1: ruff check, ruff format --check, bash -n on the shell scripts"
ruff check .
ruff format --check .
for f in setup_notebook_tpu_single_host.sh scripts/*.sh .ci/run; do bash -n "$f"; done

echo "== gate 2: notebooks/*.ipynb in sync with their .py (jupytext --update on a copy)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp notebooks/[0-9]*.py notebooks/[0-9]*.ipynb jupytext.toml "$tmp"/
(cd "$tmp" && jupytext --to ipynb --update [0-9]*.py >/dev/null 2>&1)
for nb in notebooks/[0-9]*.ipynb; do
  diff -q "$nb" "$tmp/$(basename "$nb")" >/dev/null || { echo "out of sync: $nb (run: jupytext --to ipynb --update notebooks/*.py)"; exit 1; }
done

echo "== gate 3: notebooks carry no outputs"
nbstripout --keep-id --verify notebooks/*.ipynb

echo "== gate 4: unit tests, API drift, doctests"
set +e; $PY -m pytest -q -p no:cacheprovider tests tunixkit; rc=$?; set -e
[[ $rc == 0 ]] || { echo "unit tests failed (exit $rc)"; exit $rc; }

echo "== gate 5: notebooks under nbval (smoke profile, 4 emulated CPU devices, offline), from a clean notebooks/runs/"
rm -rf notebooks/runs
set +e; $PY -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env -p no:randomly notebooks/ --ignore-glob='notebooks/*.py'; rc=$?; set -e
[[ $rc == 5 ]] && { echo "nbval collected no notebook"; exit 1; }
[[ $rc == 0 ]] || { echo "notebooks failed (exit $rc)"; exit $rc; }
echo "== all gates passed in $((SECONDS - t0))s"
