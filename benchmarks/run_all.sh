#!/usr/bin/env bash
# Run every benchmark one after the other (never two at once: they would measure each other) and keep
# each table (.txt) and its numbers (.json) in benchmarks/results/. BENCHMARKS.md quotes these files.
#   bash benchmarks/run_all.sh            # all
#   bash benchmarks/run_all.sh search     # only the ones whose name contains "search"
set -euo pipefail
cd "$(dirname "$0")/.."
results=benchmarks/results
mkdir -p "$results"
python=${PYTHON:-python}
run() {
    local name=$1; shift
    if [[ -n "$FILTER" && "$name" != *"$FILTER"* ]]; then return; fi
    echo "== $name: $*"
    "$python" "$@" --json "$results/$name.json" 2>&1 | tee "$results/$name.txt"
}
FILTER=${1:-}
run read benchmarks/bench_read.py --repeats 5
run features benchmarks/bench_features.py --repeats 5
run bvh benchmarks/bench_bvh.py --repeats 3
run search-1x-4x benchmarks/bench_search.py --scales 1,4 --repeats 3 --queries 131072 --sample 256
run search-16x benchmarks/bench_search.py --scales 16 --repeats 2 --queries 65536 --sample 64
run cache benchmarks/bench_cache.py --frames 50000 --queries 1048576 --repeats 3
run step benchmarks/bench_step.py
run step-bf16 benchmarks/bench_step.py --precision bfloat16
run step-modes benchmarks/bench_step_modes.py --seconds 100
run train benchmarks/bench_train.py --frames 50000 --repeats 3
run parity benchmarks/parity_synthetic.py --frames 50000 --iterations 2000
run parity-toolkit benchmarks/parity_toolkit.py --frames 50000 --iterations 5001
run inference benchmarks/bench_inference.py --passes 7
run checksums benchmarks/bench_checksums.py --frames 50000 --queries 1048576 --repeats 5
run kill-training benchmarks/kill_training.py --trials 3
run contention benchmarks/bench_contention.py --fast-iterations 150 --toolkit-iterations 600 --queries 1000000 --repeats 3
