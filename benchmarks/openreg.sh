#!/usr/bin/env bash
# Every suite on OpenReg (PyTorch's reference C++ out-of-tree backend, device `openreg`),
# eager and compiled, with wall times: the OpenReg row of docs/backends.md (issue 45).
#
#   benchmarks/openreg.sh                    # build or reuse OpenReg, then every run below
#   benchmarks/openreg.sh smoke kernels      # only the runs named
#
# OpenReg is built from ../shared/openreg by scripts/openreg.py (cached per torch version in
# ~/.cache/torchport/openreg/) and installed into an overlay venv there, never into the
# project's (it autoloads and would claim PrivateUse1 from the test devices). Output: one file
# per run in docs/results/backends/openreg/ (the run's summary, `show --detail` for smoke),
# and wall.txt with the wall time of each; the knowledge base is $TORCHPORT_OPENREG_DB.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${TORCHPORT_OPENREG_RESULTS:-docs/results/backends/openreg}
DB=${TORCHPORT_OPENREG_DB:-$HOME/.cache/torchport/openreg.db}
OVERLAY=$("$PY" scripts/openreg.py)
TP="$(dirname "$OVERLAY")/torchport"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}:$PWD/benchmarks/workloads"
mkdir -p "$OUT"

declare -A RUNS=(
  [doctor]="doctor"
  [smoke]="run --suite smoke --device openreg"
  [hf]="run --suite hf --cases hf/mistral,hf/opt,hf/phi --device openreg"
  [ops]="run --suite ops --cases ops/abs/float32,ops/add/float32,ops/softmax/float32,ops/cumsum/float32,ops/mm/float32,ops/nn.functional.conv2d/float32,ops/abs/int64 --device openreg"
  [flex]="run --suite flex --cases flex/noop/b2h4s256d64/*,flex/causal/b2h4s256d64/* --device openreg"
  [generate]="run --suite smoke --cases hf/llama,hf/gpt2 --scenario generate --device openreg"
  [dist]="run --suite dist --cases dist/collectives,dist/ddp/mlp --device openreg"
  [kernels]="run --suite kernels --device openreg"
  [workload]="run --workload hf_forward:llama --device openreg"
)
ORDER=(doctor smoke kernels dist generate flex ops hf workload)
[ $# -gt 0 ] && ORDER=("$@")
for name in "${ORDER[@]}"; do
  args=${RUNS[$name]:?unknown run $name}
  [ "$name" = doctor ] || args="$args --db $DB"
  start=$(date +%s)
  # shellcheck disable=SC2086  # the args are words
  set +e; "$TP" $args > "$OUT/$name.txt" 2>&1; rc=$?; set -e
  wall=$(( $(date +%s) - start ))
  echo "$name: exit $rc, wall ${wall} s ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))" \
    | tee -a "$OUT/wall.txt"
  if [ "$name" = smoke ]; then "$TP" show --db "$DB" --detail > "$OUT/smoke_detail.txt" 2>&1 || true; fi
done
