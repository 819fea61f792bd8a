#!/usr/bin/env bash
# Wall time of the hf suite in eager mode, --jobs 2 then serial (issue: parallel sweeps).
# Each side starts with its own empty float64 reference cache, so neither reuses what the other
# computed. Usage: benchmarks/hf_jobs.sh [CASE_GLOB] (default: every hf case)
#   bash benchmarks/hf_jobs.sh 'hf/[a-c]*' >> docs/results/hf_jobs_cpu.txt
set -u
TP=${TORCHPORT:-torchport}
glob=${1:-}
cases=()
[ -n "$glob" ] && cases=(--cases "$glob")
folder=$(mktemp -d)
echo "\$ benchmarks/hf_jobs.sh ${glob:-(all hf cases)}   # $(nproc) cores, $(date -u +%FT%TZ)"
for jobs in 2 1; do
    export TORCHPORT_REFERENCE_CACHE=$(mktemp -d)
    start=$(date +%s.%N)
    "$TP" run --suite hf "${cases[@]}" --modes eager --device cpu --probes none --jobs "$jobs" \
        --db "$folder/jobs$jobs.db" > "$folder/out$jobs.txt" 2>&1
    rc=$?
    end=$(date +%s.%N)
    counts=$("$TP" runs --db "$folder/jobs$jobs.db" --json | python3 -c \
        'import json,sys; print(json.load(sys.stdin)[0]["counts"])')
    echo "--jobs $jobs: exit $rc, wall $(echo "$end - $start" | bc) s, $counts," \
        "load before/after $(cut -d' ' -f1-3 /proc/loadavg)"
done
