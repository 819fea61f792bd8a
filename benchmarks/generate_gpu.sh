#!/usr/bin/env bash
# Decode tokens/s of a ~0.5 B llama (benchmarks/workloads/llama_500m.py, random init) at batch 1
# and 8 on one GPU: eager vs compiled (Inductor, mode default) vs compiled with
# reduce-overhead (CUDA graphs), bfloat16, prompts of 128 and 512 tokens, 64 new tokens.
#
#   bash benchmarks/generate_gpu.sh [OUT]        (default docs/results/generate_gpu.txt)
#   DEVICE=cpu DTYPE=float32 FACTORY=make_tiny bash benchmarks/generate_gpu.sh /tmp/g.txt
#
# Works from a plain checkout (no installation, no package registry): when torchport's entry
# points are missing, the package metadata is written from pyproject.toml (as gpu_check.py does).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out="${1:-docs/results/generate_gpu.txt}"
case "$out" in /*) ;; *) out="$repo/$out" ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "from importlib.metadata import entry_points as e; assert 'serve' in {p.name for p in e(group='torchport.probes')}" 2>/dev/null; then
  python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from gpu_check import write_metadata; write_metadata('$work/_meta')"
  export PYTHONPATH="$work/_meta:$PYTHONPATH"
fi
common=(--workload "llama_500m:${FACTORY:-make}" --scenario generate --device "${DEVICE:-cuda}"
  --dtype "${DTYPE:-bfloat16}" --prompt-lengths "${PROMPTS:-128,512}" --new-tokens "${NEW:-64}"
  --gen-batches 1,8 --probes serve --db "$work/kb.db")
run() { (cd benchmarks/workloads && python3 -m torchport.interfaces.cli run "$@"); }
{
  echo "# bash benchmarks/generate_gpu.sh  ($(date -u +%FT%TZ), $(hostname))"
  echo "# eager and compiled (Inductor, --compile-mode default):"
  echo "# torchport run ${common[*]} --modes eager,compile"
  run "${common[@]}" --modes eager,compile
  echo
  echo "# compiled with CUDA graphs:"
  echo "# torchport run ${common[*]} --modes compile --compile-mode reduce-overhead"
  run "${common[@]}" --modes compile --compile-mode reduce-overhead
} 2>&1 | tee "$out"
