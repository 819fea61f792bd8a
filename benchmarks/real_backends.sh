#!/usr/bin/env bash
# Real out-of-tree backends on this machine's CPU (issue 21): one venv per backend, then the
# smoke suite on torch_xla (PJRT CPU) and torchax (`jax`), eager and compile, and `doctor` for
# TorchTPU (the real package installs here; it needs TPU chips to run anything).
#
#   benchmarks/real_backends.sh            # setup + run + report
#   benchmarks/real_backends.sh setup      # only build the venvs (large downloads: ~4 GB each
#                                          # for torch 2.9.0 / 2.12.1, whose PyPI builds are CUDA)
#   benchmarks/real_backends.sh run        # only run (venvs already built)
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

case "${1:-all}" in
  setup) setup ;;
  run) run_all ;;
  all) setup; run_all ;;
  *) echo "usage: $0 [setup|run|all]" >&2; exit 2 ;;
esac
