#!/usr/bin/env bash
# The flex suite on the CPU, as a user runs it, from an empty Inductor cache:
#   bash benchmarks/flex_cpu.sh [OUT] [extra torchport run flags...]
# Writes to OUT (default docs/results/flex_cpu.txt): the command, wall time, machine load,
# and the run's `torchport show` (summary line, per-family table, every view).
# Needs the venv (make install). Forward+backward cases are skips on the CPU (torch refuses
# a FlexAttention backward there), so the work is the forward cases, eager and compiled.
# The CPU time of the whole process tree (/usr/bin/time) is recorded beside the wall time:
# on a shared machine the wall time says as much about the neighbours as about the suite.
# FLEX_DB=PATH keeps the knowledge base there (default: a temporary file, removed).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-docs/results/flex_cpu.txt}")"
shift || true
bin="$PWD/.venv/bin"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
db="${FLEX_DB:-$work/kb.db}"
cmd=(torchport run --suite flex --device cpu --compile-timeout 60 --db "$db" "$@")
{
  echo "\$ TORCHINDUCTOR_CACHE_DIR=<new empty folder> /usr/bin/time -v ${cmd[*]/$db/<db>}"
  echo "started $(date -u +%FT%TZ), $(nproc) logical cores, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out"
start=$(date +%s)
(cd "$work" && TORCHINDUCTOR_CACHE_DIR="$work/inductor" PATH="$bin:$PATH" \
  /usr/bin/time -v -o "$work/time.txt" "${cmd[@]}" > "$work/run.log" 2>&1) \
  || echo "torchport run exited $?" >> "$out"
end=$(date +%s)
{
  echo "ended $(date -u +%FT%TZ): wall $((end - start)) s ($(( (end - start) / 60 )) min $(( (end - start) % 60 )) s), load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -E "User time|System time|Percent of CPU|Elapsed" "$work/time.txt" | sed 's/^\s*/\/usr\/bin\/time -v: /'
  echo
  echo "\$ torchport show --db <db>"
  (cd "$work" && "$bin/torchport" show --db "$db")
} >> "$out"
