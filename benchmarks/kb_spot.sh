#!/bin/bash
# Spot check: each command 3 times after one warm-up on the million-result SQLite file; wall s, CPU s, peak RSS.
T=${TORCHPORT:-.venv/bin/torchport}; DB=${1:?usage: kb_spot.sh DB}
mkdir -p /tmp/kbspot
one() { /usr/bin/time -f "%e %U %S %M" "$T" "$@" --db $DB > /dev/null 2> /tmp/kbspot/t.txt; tail -1 /tmp/kbspot/t.txt; }
for c in "runs" "show cuda-2.13" "cases smoke" "cases hf" "compare cuda-2.12 cuda-2.13 --json" "baseline save cuda-2.13 -o /tmp/kbspot/b.json" "gate cuda-2.13 --baseline /tmp/kbspot/b.json" "export cuda-2.13 -o /tmp/kbspot/e.jsonl"; do
  one $c > /dev/null
  res=""; for i in 1 2 3; do res="$res | $(one $c) (load $(cut -d' ' -f1 /proc/loadavg))"; done
  echo "$c$res"
done
