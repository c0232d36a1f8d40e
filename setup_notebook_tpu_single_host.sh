#!/usr/bin/env bash
# Set up tunixkit on this machine (idempotent), then optionally run a notebook, the tests or Jupyter.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bash setup_notebook_tpu_single_host.sh [--run NOTEBOOK [-p NAME VALUE]...] [--test] [--jupyter] [--tpu]
       bash setup_notebook_tpu_single_host.sh --kernel PYTHON

Sets up tunixkit for the machine it finds:
  plain machine / TPU VM  creates .venv, installs the pinned requirements.txt and tunixkit (editable),
                          registers a Jupyter kernel "tunixkit", prints versions and JAX devices.
                          On a TPU VM (or with --tpu) it adds jax[tpu] matching the pinned jax.
  Kaggle / Colab          (or --kernel PYTHON: what every notebook's first cell runs) installs
                          tunixkit into that running Python as a regular package (not editable: a
                          running kernel sees it without a restart), adds the light dependencies it
                          lacks with --no-deps, never upgrades the preinstalled jax/libtpu, then
                          checks that the installed tunix offers every API tunixkit calls and has
                          its own dependencies (python -m tunixkit.tools.doctor), installing missing ones.
Re-running skips what is already installed.

Then:
  --run NOTEBOOK   execute NOTEBOOK headless with papermill into runs/<name>/ (OUTPUT_DIR too);
                   extra papermill parameters follow as -p NAME VALUE
  --test           run every CI gate (scripts/test.sh): notebook sync, stripped outputs,
                   unit/doctests, and all notebooks under nbval on the smoke profile
  --jupyter        start JupyterLab on 127.0.0.1:8888 (forward the port: ssh -L 8888:localhost:8888 ...)
  --tpu            treat this machine as a TPU VM
  -h, --help       this text
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
UV_VERSION=0.13.9  # the installer of the pinned stack on a plain machine (pip if it cannot be had)
RUN_NB="" ; TEST=0 ; JUPYTER=0 ; TPU=0 ; PM_ARGS=() ; KERNEL_PY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --run) RUN_NB="${2:?--run needs a notebook path}"; shift 2 ;;
    -p) PM_ARGS+=(-p "${2:?}" "${3:?}"); shift 3 ;;
    --test) TEST=1; shift ;;
    --jupyter) JUPYTER=1; shift ;;
    --tpu) TPU=1; shift ;;
    --kernel) KERNEL_PY="${2:?--kernel needs the python of the kernel}"; shift 2 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

say() { printf '\n[setup] %s\n' "$*"; }

if [[ -z "$KERNEL_PY" ]] && { [[ -n "${KAGGLE_KERNEL_RUN_TYPE:-}" ]] || python3 -c "import google.colab" 2>/dev/null; }; then
  KERNEL_PY="$(command -v python3)"
fi
pin() { grep -i "^$1==" "$ROOT/requirements.txt" || echo "$1"; }
if [[ -n "$KERNEL_PY" ]]; then
  PY="$KERNEL_PY"
  say "installing tunixkit into $PY (not editable, --no-deps: jax/libtpu stay as they are)"
  # An attached copy (the Internet off) is read-only and there is no package index: build from a
  # copy (a build writes into its folder), with the kernel's own setuptools when it can (no
  # isolated build environment to download).
  src="$(mktemp -d)/tunixkit"; mkdir -p "$src"
  cp -r "$ROOT"/pyproject.toml "$ROOT"/README.md "$ROOT"/tunixkit "$src"/
  isolation=()  # the kernel's setuptools builds tunixkit when it can: >= 70.1, or >= 61 with wheel
  if "$PY" -c "import importlib.util as u, setuptools as s, sys; v = tuple(int(x) for x in s.__version__.split('.')[:2]); sys.exit(not (v >= (70, 1) or v >= (61, 0) and u.find_spec('wheel')))" 2>/dev/null; then
    isolation=(--no-build-isolation)
  fi
  "$PY" -m pip install -q --no-deps --force-reinstall "${isolation[@]}" "$src"
  # Light dependencies these images may lack; --no-deps so nothing upgrades jax.
  # (Found without importing them: one Python start, not four imports; grain's alone takes seconds.)
  # (module:package; math-verify reads MATH-500's LaTeX answers, sympy under it is in the images)
  for pkg in $("$PY" -c "import importlib.util as u; print(*[p for m, p in (x.split(':') for x in 'humanize:humanize grain:grain safetensors:safetensors sentencepiece:sentencepiece math_verify:math-verify latex2sympy2_extended:latex2sympy2_extended antlr4:antlr4-python3-runtime'.split()) if u.find_spec(m) is None])"); do
    "$PY" -m pip install -q --no-deps "$(pin "$pkg")"
  done
  # tunix, qwix and flax at the versions tunixkit was tested with, whatever the image has; jax and
  # libtpu stay (a live kernel cannot swap them): a difference is reported with what it means.
  version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || echo none; }
  for pkg in google-tunix qwix flax; do
    want="$(pin "$pkg" | cut -d= -f3)"; have="$(version "$pkg")"
    if [[ -n "$want" && "$have" != "$want" ]]; then
      say "$pkg: the image has $have, tunixkit was tested with $want: installing $want (--no-deps)"
      "$PY" -m pip install -q --no-deps "$pkg==$want"
    fi
  done
  want="$(pin jax | cut -d= -f3)"; have="$(version jax)"
  if [[ "$have" != "$want" ]]; then
    say "jax: the image has $have, tunixkit was tested with $want; kept (no restart, no jax upgrade in a live kernel). The doctor below checks every tunix API tunixkit calls; a failure after it is worth reporting with both versions."
  fi
  fix="$("$PY" -m tunixkit.tools.deps --pins "$ROOT/requirements.txt")"  # metadata only: no tunix import
  if [[ -n "$fix" ]]; then say "tunix needs: $fix"; "$PY" -m $fix; fi
  "$PY" -m tunixkit.tools.doctor --pins "$ROOT/requirements.txt" || { echo "[setup] fix the APIs above, then re-run this script" >&2; exit 1; }
else
  VENV="$ROOT/.venv"
  [[ -x "$VENV/bin/python" ]] || { say "creating $VENV"; python3 -m venv "$VENV"; }
  PY="$VENV/bin/python"
  STAMP="$VENV/.tunixkit-requirements.sha256"
  REQS=("$ROOT/requirements.txt"); [[ $TEST == 1 ]] && REQS+=("$ROOT/requirements-test.txt")
  XCHECK=(); [[ $TEST == 1 ]] && XCHECK=("$ROOT/requirements-xcheck.txt")  # torch, in its own folder
  # packages wanted for a file they ship, not their code (their own dependencies are not installed)
  NODEPS=(); [[ $TEST == 1 ]] && NODEPS=("$ROOT/requirements-nodeps.txt")
  WANT="$(cat "${REQS[@]}" "${XCHECK[@]}" "${NODEPS[@]}" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
  if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$WANT" ]]; then
    # uv (pinned) resolves and installs the pinned stack in seconds; pip (minutes) if uv cannot be
    # had. Both read pip's find-links (PIP_FIND_LINKS / pip.conf), where a local torch wheel may lie.
    links="${PIP_FIND_LINKS:-$("$PY" -m pip config get global.find-links 2>/dev/null || true)}"
    UV=("$PY" -m uv pip install -q --python "$PY")
    [[ -n "$links" ]] && UV+=(--find-links "$links")
    # requirements-xcheck.txt goes to $VENV/xcheck, which only tests/test_transformers_xcheck.py
    # adds to its path (why: that file).
    rm -rf "$VENV/xcheck"
    if "$PY" -m pip install -q "uv==$UV_VERSION" 2>/dev/null; then
      say "installing pinned requirements with uv $UV_VERSION (first time: under a minute)"
      for r in "${XCHECK[@]}"; do "${UV[@]}" --no-deps --target "$VENV/xcheck" -r "$r"; done
      for r in "${REQS[@]}"; do UV+=(-r "$r"); done
      "${UV[@]}"
      for r in "${NODEPS[@]}"; do "$PY" -m uv pip install -q --python "$PY" --no-deps -r "$r"; done
      "$PY" -m uv pip install -q --python "$PY" --no-deps -e "$ROOT"
    else
      say "installing pinned requirements with pip (first time: ~5 minutes)"
      for r in "${XCHECK[@]}"; do "$PY" -m pip install -q --no-deps --target "$VENV/xcheck" -r "$r"; done
      for r in "${REQS[@]}"; do "$PY" -m pip install -q -r "$r"; done
      for r in "${NODEPS[@]}"; do "$PY" -m pip install -q --no-deps -r "$r"; done
      "$PY" -m pip install -q --no-deps -e "$ROOT"
    fi
    "$PY" -m ipykernel install --user --name tunixkit --display-name "Python (tunixkit)" >/dev/null
    echo "$WANT" > "$STAMP"
  else
    say "requirements already installed (delete $STAMP to force)"
  fi
  if [[ $TPU == 1 || -e /dev/accel0 || -e /dev/vfio/0 ]]; then
    JAXV="$(grep '^jax==' "$ROOT/requirements.txt" | cut -d= -f3)"
    "$PY" -c "import libtpu" 2>/dev/null || { say "TPU VM: installing jax[tpu]==$JAXV"; "$PY" -m pip install -q "jax[tpu]==$JAXV"; }
  fi
fi

# (Not in a kernel's Python: a second process must not grab the TPU the kernel holds.)
if [[ -z "$KERNEL_PY" ]]; then
  "$PY" - <<'EOF'
import importlib.metadata as md
import jax
vers = {p: md.version(p) for p in ("jax", "flax", "google-tunix", "qwix")}
print("[setup] " + ", ".join(f"{k} {v}" for k, v in vers.items()))
print(f"[setup] JAX backend {jax.default_backend()}: {jax.devices()}")
EOF
fi

BIN="$(dirname "$PY")"
if [[ -n "$RUN_NB" ]]; then
  name="$(basename "$RUN_NB" .ipynb)"; name="${name%.py}"
  out="$ROOT/runs/$name"; mkdir -p "$out"
  nb="$ROOT/notebooks/$name.ipynb"; [[ -f "$RUN_NB" ]] && nb="$(cd "$(dirname "$RUN_NB")" && pwd)/$name.ipynb"
  say "running $nb -> $out/executed.ipynb"
  "$PY" -m papermill "$nb" "$out/executed.ipynb" -p OUTPUT_DIR "$out" "${PM_ARGS[@]}" --cwd "$out"
  say "done: $out/summary.json"; cat "$out/summary.json"; echo
fi
if [[ $TEST == 1 ]]; then
  PATH="$BIN:$PATH" bash "$ROOT/scripts/test.sh"
fi
if [[ $JUPYTER == 1 ]]; then
  "$PY" -c "import jupyterlab" 2>/dev/null || "$PY" -m pip install -q jupyterlab
  exec "$BIN/jupyter" lab --no-browser --ip=127.0.0.1 --port 8888 --notebook-dir "$ROOT/notebooks"
fi
