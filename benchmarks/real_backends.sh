#!/usr/bin/env bash
# Real out-of-tree backends on this machine's CPU (issue 21), as one matrix (issue 34): every
# environment (torch_xla, torchax, TorchTPU, a broken torch_npu install, the CPU baseline), every
# run (smoke, forward-only workloads, XGLM) and every check (doctor, the timing scripts) is in
# benchmarks/real_backends.toml; this wrapper only names where the results go.
#
#   benchmarks/real_backends.sh                       # build what is missing, run what is not done
#   benchmarks/real_backends.sh --build-only          # only the environments (~4 GB each for
#                                                     # torch 2.9.0 / 2.12.1, CUDA builds on PyPI)
#   benchmarks/real_backends.sh --runs smoke --cases smoke/mlp --modes eager --no-checks
#                                                     # a short check: one run per environment
#
# Any other `torchport matrix` option passes through. Output: docs/results/backends/matrix/
# (release note with the runs and checks tables, locks, checks/<env>/<check>.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${TORCHPORT:-.venv/bin/torchport}" matrix benchmarks/real_backends.toml \
  --out "${TORCHPORT_BACKEND_RESULTS:-docs/results/backends/matrix}" \
  --db "${TORCHPORT_BACKEND_DB:-$HOME/.cache/torchport/real-backends.db}" "$@"
