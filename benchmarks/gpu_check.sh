#!/usr/bin/env bash
# GPU check from a plain checkout (no installation): bash benchmarks/gpu_check.sh [OUT] [flags...]
# Writes everything to OUT (default docs/results/gpu_check); see benchmarks/gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/results/gpu_check}"
shift || true
PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" exec python3 benchmarks/gpu_check.py --out "$out" "$@"
