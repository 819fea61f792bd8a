#!/usr/bin/env bash
# The GPU check's parts rehearsed on the CPU with tiny models (what the slow test
# tests/benchmarks/test_gpu_check.py runs, part by part):
#   bash benchmarks/gpu_check_rehearsal.sh OUT [PART ...]     (default: every part, in order)
# Each part writes OUT/PART/report.txt; the autotune part's Inductor cache (binary) is kept in
# the temporary folder, packed and restored there (autotune_warm starts from it).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:?usage: gpu_check_rehearsal.sh OUT [PART ...]}")"
shift
parts=("$@")
tmp="${TMPDIR:-/tmp}/gpu_check_rehearsal_$(printf %s "$out" | md5sum | cut -c1-8)"
[ ${#parts[@]} -gt 0 ] || parts=(agree autotune autotune_warm smoke generate kernels checks)
for part in "${parts[@]}"; do
  extra=()
  case "$part" in
    autotune) extra=(--cache-pack "$tmp/pack" --inductor-cache "$tmp/inductor") ;;
    autotune_warm) extra=(--cache-from "$tmp/pack" --inductor-cache "$tmp/inductor") ;;
  esac
  rm -rf "${out:?}/$part"
  # --deadline-s far off: a loaded CPU is slower than the GPU each part is sized for
  PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" python3 benchmarks/gpu_check.py --part "$part" \
    --tiny --device cpu --dtype float32 --budget-s 0.2 --peak-tflops 1 --task-timeout 900 \
    --deadline-s 36000 --out "$out/$part" "${extra[@]}"
done
