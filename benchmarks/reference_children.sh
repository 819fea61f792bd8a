#!/bin/bash
# The float64 references of a run, from an empty reference cache: this checkout against
# another revision's source (default main), alternated, on the same installed environment.
#
#   bash benchmarks/reference_children.sh [REV] [ROUNDS] > docs/results/reference_children.txt
#
# Each side runs `torchport run --suite smoke --modes eager --probes none` (6 cases, each
# needing its reference) with a new reference cache and a new Inductor cache, and prints its
# wall time and each result's recorded reference_s (the first pays the reference child's
# start-up). Needs sqlite3 and the checkout's .venv.
set -euo pipefail
rev=${1:-main}
rounds=${2:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/torchport-refs-ab-XXXX)
trap 'rm -rf "$work"' EXIT
git -C "$here" archive "$rev" src | tar -x -C "$work"
echo "+ bash benchmarks/reference_children.sh $rev $rounds"
echo "this checkout: $(git -C "$here" rev-parse --short HEAD); other: $rev ($(git -C "$here" rev-parse --short "$rev"))"
side() {  # side NAME [PYTHONPATH]
    local name=$1 db="$work/$1-$2.db"
    local cache="$work/refs-$1-$2" ind="$work/ind-$1-$2"
    echo
    echo "$name: load before: $(uptime)"
    local start end
    start=$(date +%s.%N)
    (cd "$work" && env ${3:+PYTHONPATH=$3} TORCHPORT_REFERENCE_CACHE="$cache" \
        TORCHINDUCTOR_CACHE_DIR="$ind" "$here/.venv/bin/torchport" run --suite smoke \
        --modes eager --probes none --device cpu --db "$db" > "$work/$name.log" 2>&1)
    end=$(date +%s.%N)
    echo "$name: wall $(echo "$end - $start" | bc) s; load after: $(uptime)"
    sqlite3 "$db" "select '  ' || case_id || ' reference_s ' || round(json_extract(durations, '\$.reference_s'), 2) || ' (' || json_extract(findings, '\$.reference.cache') || ')' from results order by id"
    sqlite3 "$db" "select '  sum of reference_s: ' || round(sum(json_extract(durations, '\$.reference_s')), 1) || ' s' from results"
}
for round in $(seq 1 "$rounds"); do
    side "this-checkout" "$round" ""
    side "$rev" "$round" "$work/src"
done
