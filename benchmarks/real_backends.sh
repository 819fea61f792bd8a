#!/usr/bin/env bash
# Real out-of-tree backends on this machine's CPU (issue 21): one venv per backend, then the
# smoke suite on torch_xla (PJRT CPU) and torchax (`jax`), eager and compile, and `doctor` for
# TorchTPU (the real package installs here; it needs TPU chips to run anything).
#
#   benchmarks/real_backends.sh            # setup + run + report
#   benchmarks/real_backends.sh setup      # only build the venvs (large downloads: ~4 GB each
#                                          # for torch 2.9.0 / 2.12.1, whose PyPI builds are CUDA)
#   benchmarks/real_backends.sh run        # only run (venvs already built)
#   benchmarks/real_backends.sh xla|jax    # only that backend's runs (venvs already built)
#   benchmarks/real_backends.sh forward-xla|forward-jax   # only its forward-only workloads
#   benchmarks/real_backends.sh tpu        # only TorchTPU's doctor
#   benchmarks/real_backends.sh table      # docs/results/backends/table.md from what was kept
#
# Pins (why): torch_xla 2.9.0 pins torch 2.9.0; torchax 0.0.13 does not import on torch 2.13
# (aten.prod overload), it works on torch 2.12.1 with jax[cpu] 0.10.2; torch_tpu 0.2.0 supports
# torch 2.11-2.15. torchport itself declares torch>=2.11, so it is installed with --no-deps.
# Output: docs/results/backends/<backend>/ (JSON results, tables, the commands that made them).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENVS=${TORCHPORT_BACKEND_VENVS:-$HOME/.cache/torchport/backend-venvs}
OUT=${TORCHPORT_BACKEND_RESULTS:-$ROOT/docs/results/backends}
PY=${PYTHON:-python3}
# backend_summary.py reads SQLite only (no torch): any Python with torchport installed.
SUMMARY_PY=${TORCHPORT_SUMMARY_PYTHON:-$VENVS/tpu/bin/python}
TORCHPORT_DEPS=("transformers>=5.0,<6" "click>=8.1" "rich>=13" "psutil>=5.9")

make_venv() {  # name, pip specs...
  local name=$1; shift
  local venv="$VENVS/$name"
  if [[ -f "$venv/.installed" ]]; then echo "[$name] venv ready: $venv"; return; fi
  echo "[$name] building $venv: $*"
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q "$@" "${TORCHPORT_DEPS[@]}"
  "$venv/bin/python" -m pip install -q --no-deps -e "$ROOT"
  "$venv/bin/python" -m pip freeze > "$venv/freeze.txt"
  touch "$venv/.installed"
}

setup() {
  mkdir -p "$VENVS"
  # torch 2.9.0 on PyPI is the CUDA build; it imports and runs on a machine without a GPU.
  make_venv xla "torch==2.9.0" "torch_xla==2.9.0"
  make_venv jax "torch==2.12.1" "torchax==0.0.13" "jax[cpu]==0.10.2"
  make_venv tpu "torch==2.13.0" "torch_tpu==0.2.0"
}

# Run a command, keep it and its output: OUT/<dir>/<name>.txt starts with the command line.
keep() {  # dir, name, command...
  local dir="$OUT/$1" name=$2; shift 2
  mkdir -p "$dir"
  echo "+ $*" | sed "s|$ROOT|.|g; s|$VENVS|\$VENVS|g" > "$dir/$name.txt"
  echo "[$(basename "$dir")] $name: $*"
  local start=$SECONDS
  # A failing check is a result to keep, not a reason to stop the other backends.
  "$@" >> "$dir/$name.txt" 2>&1 || echo "(exit code $?)" >> "$dir/$name.txt"
  echo "(wall time $((SECONDS - start)) s)" >> "$dir/$name.txt"
}

summary() {  # dir, db
  "$SUMMARY_PY" "$ROOT/benchmarks/backend_summary.py" "$2" --out "$OUT/$1/${3:-summary}.txt" \
    > /dev/null
}

PROBES=placement,perf,compile
# Per-case limit: compiled qwen3_moe with the perf and compile probes runs past the default
# 600 s on a 2-core machine shared with other jobs.
CASE_TIMEOUT=${TORCHPORT_BACKEND_CASE_TIMEOUT:-1800}
HF_FORWARD=(llama gpt2 qwen3_moe)

run_all() {
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  # One reference cache for the whole script: each backend's float64 reference is computed
  # once per torch version, in a clean child, and reused by both modes.
  export TORCHPORT_REFERENCE_CACHE="$work/references"
  run_xla "$work"
  run_jax "$work"

  tpu_doctor

  xglm "$work"
  broken_npu "$work"
  table
}

# TorchTPU 0.2.0: installs and autoloads here; no TPU chips, so no device.
tpu_doctor() {
  keep tpu doctor "$VENVS/tpu/bin/torchport" doctor
}

# The table docs/backends.md shows, made from the summaries and wall times kept above.
table() {
  "$SUMMARY_PY" "$ROOT/benchmarks/backend_table.py" "$OUT" --out "$OUT/table.md" > /dev/null
}

# Forward-only workloads of the smoke suite's HF models (torchport's loss inside the forward).
hf_forward() {  # backend, work folder
  local model
  for model in "${HF_FORWARD[@]}"; do
    (cd "$ROOT/benchmarks/workloads" && keep "$1" "forward_$model" "$VENVS/$1/bin/torchport" \
      run --workload "hf_forward:$model" --device "$1" --modes eager,compile --probes "$PROBES" \
      --timeout "$CASE_TIMEOUT" --db "$2/$1_forward.db")
  done
  summary "$1" "$2/$1_forward.db" forward_summary
}

run_xla() {  # work folder
  local work=$1
  # torch_xla 2.9.0 on PJRT CPU: smoke, eager and compile, every probe; forward-only HF
  # workloads; the first eager step's compiles with and without one wait before copying outputs.
  export PJRT_DEVICE=CPU
  keep xla smoke "$VENVS/xla/bin/torchport" run --suite smoke --device xla \
    --modes eager,compile --probes "$PROBES" --timeout "$CASE_TIMEOUT" --db "$work/xla.db"
  summary xla "$work/xla.db"
  hf_forward xla "$work"
  keep xla fallback_nonzero "$VENVS/xla/bin/torchport" results --db "$work/xla.db" \
    --fallback-op aten.nonzero
  keep xla first_step "$VENVS/xla/bin/python" "$ROOT/benchmarks/xla_first_step.py"
  keep xla doctor "$VENVS/xla/bin/torchport" doctor
  unset PJRT_DEVICE
}

run_jax() {  # work folder
  local work=$1
  # torchax 0.0.13 (jax): smoke (training: backward cannot run through torch autograd there),
  # then forward-only workloads (an MLP and the HF models), eager and compile; the timer
  # against block_until_ready.
  keep jax smoke "$VENVS/jax/bin/torchport" run --suite smoke --device jax \
    --modes eager,compile --probes "$PROBES" --timeout "$CASE_TIMEOUT" --db "$work/jax.db"
  summary jax "$work/jax.db"
  (cd "$ROOT/benchmarks/workloads" && keep jax mlp_forward "$VENVS/jax/bin/torchport" run \
    --workload mlp_forward:make --device jax --modes eager,compile --probes "$PROBES" \
    --db "$work/jax_fwd.db")
  summary jax "$work/jax_fwd.db" mlp_forward_summary
  hf_forward jax "$work"
  keep jax timing_check "$VENVS/jax/bin/python" "$ROOT/benchmarks/jax_timing_check.py"
  keep jax doctor "$VENVS/jax/bin/torchport" doctor
}

# A broken backend install: torch_npu 2.9.0 (for torch 2.9.0) without the Ascend libraries,
# put on the xla venv's path in a folder of its own (the venv itself is left alone): its
# autoload breaks `import torch`, and doctor must say so in one line.
broken_npu() {  # work folder
  "$VENVS/xla/bin/python" -m pip install -q --no-deps --target "$1/npu_site" "torch_npu==2.9.0"
  PYTHONPATH="$1/npu_site" keep npu doctor_broken "$VENVS/xla/bin/torchport" doctor
}

# The weaker reference: transformers' XGLM overflows in float64 on the CPU. Run in the TorchTPU
# venv (torch 2.13) with backend autoload off: with torch_tpu loaded and no TPU, libtpu's
# lookups of GCP instance metadata (30 tries per variable) stall a CPU run for many minutes.
xglm() {  # work folder
  TORCH_DEVICE_BACKEND_AUTOLOAD=0 keep cpu xglm "$VENVS/tpu/bin/torchport" run --suite hf \
    --cases xglm --device cpu --modes eager,compile --db "$1/cpu.db"
  summary cpu "$1/cpu.db"
}

case "${1:-all}" in
  setup) setup ;;
  run) run_all ;;
  xla|jax) w=$(mktemp -d); TORCHPORT_REFERENCE_CACHE="$w/references" "run_$1" "$w"; rm -rf "$w" ;;
  xglm) w=$(mktemp -d); TORCHPORT_REFERENCE_CACHE="$w/references" xglm "$w"; rm -rf "$w" ;;
  npu) w=$(mktemp -d); broken_npu "$w"; rm -rf "$w" ;;
  forward-xla|forward-jax)  # only the forward-only workloads of one backend
    w=$(mktemp -d); export TORCHPORT_REFERENCE_CACHE="$w/references"
    [[ $1 == forward-xla ]] && export PJRT_DEVICE=CPU
    hf_forward "${1#forward-}" "$w"; rm -rf "$w" ;;
  tpu) tpu_doctor ;;
  table) table ;;
  all) setup; run_all ;;
  *) echo "usage: $0 [setup|run|xla|jax|forward-xla|forward-jax|xglm|npu|tpu|table|all]" >&2; exit 2 ;;
esac
