#!/usr/bin/env bash
# Issue 11's GPU checks as one script for a lent GPU machine (the device tool's `run`), sized for its
# 15 minutes: the synthetic database, bench_step.py on the GPU in float32 and bfloat16, a 16 M-query
# cache searched on the GPU (the torch backend: no faiss or compiled extension needed there), then 50,000
# iterations at batch 1,024 from the cache with --device cuda, in float32 and in bfloat16. summary.txt,
# log.txt (every command's output) and the two step JSON files land in $OUT (else benchmarks/results/gpu).
# It runs from the working tree (PYTHONPATH), without installing it. The summary grows step by step, so a
# run stopped at the device's time limit still returns what it finished.
#   bash benchmarks/gpu_check.sh
# A CPU rehearsal of the same steps at small sizes (what CI-less checking can do here):
#   DEVICE=cpu FRAMES=5000 QUERIES=65536 ITERATIONS=300 DECOMPRESSOR_ITERATIONS=50 STEPPER_ITERATIONS=50 \
#       bash benchmarks/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
device=${DEVICE:-cuda}
frames=${FRAMES:-50000}
queries=${QUERIES:-16000000}
iterations=${ITERATIONS:-50000}
python=${PYTHON:-python3}
out=${OUT:-benchmarks/results/gpu}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
log() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }
seconds_of() {  # seconds_of NAME COMMAND...: run it, its output to $out/log.txt, its wall time to the summary
    local name=$1 started elapsed status=0; shift
    started=$(date +%s%N)
    "$@" > "$work/$name.raw" 2>&1 || status=$?
    elapsed=$(( ($(date +%s%N) - started) / 1000000 ))
    { echo "== $name: $*"; tr '\r' '\n' < "$work/$name.raw" | grep -v '^[[:space:]]*$' || true; } >> "$out/log.txt"
    if [ "$status" -ne 0 ]; then
        tail -n 20 "$out/log.txt"
        log "$name FAILED (exit $status) after $((elapsed / 1000)) s"
        exit "$status"
    fi
    log "$name: $((elapsed / 1000)).$(printf %03d $((elapsed % 1000))) s wall; last line: $(tail -n 1 "$out/log.txt")"
}

: > "$out/summary.txt"
: > "$out/log.txt"
log "device $device; $("$python" -c 'import torch, sys
name = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, {name}")')"
seconds_of generate "$python" generate_database.py --out "$work/data" --frames "$frames"
for precision in float32 bfloat16; do
    seconds_of "step-$precision" "$python" benchmarks/bench_step.py --device "$device" --frames "$frames" \
        --backend balltree --repeats 5 --precision "$precision" --json "$out/step-$precision.json"
done
seconds_of build-cache "$python" -c 'from motion_matching.cli import main; main()' build-cache \
    --features "$work/data/features.bin" --queries "$queries" --backend torch --device "$device" \
    --out "$work/cache.h5" --quiet
for precision in float32 bfloat16; do
    seconds_of "train-$precision" "$python" train_projector.py --features "$work/data/features.bin" \
        --latent "$work/data/latent.bin" --database "$work/data/database.bin" --offline "$work/cache.h5" \
        --device "$device" --batch-size 1024 --iterations "$iterations" --precision "$precision" \
        --out "$work/run-$precision"
done
# issue 22: the decompressor's fast recipe on the device (its batches are drawn on the CPU, as the script's are,
# and moved), then its evaluation over every frame
seconds_of decompressor "$python" train_decompressor.py --database "$work/data/database.bin" \
    --features "$work/data/features.bin" --device "$device" --recipe fast \
    --iterations "${DECOMPRESSOR_ITERATIONS:-5000}" --out "$work/decompressor" --quiet
seconds_of evaluate-decompressor "$python" -c 'from motion_matching.cli import main; main()' evaluate-decompressor \
    --decompressor "$work/decompressor/decompressor.bin" --latent "$work/decompressor/latent.bin" \
    --database "$work/data/database.bin" --features "$work/data/features.bin" --out "$out/decompressor" --no-plots
# issue 23: the stepper's fast recipe on the device, on the latent the decompressor just wrote, then its rollout
# evaluation with that decompressor decoding the stepped poses
seconds_of stepper "$python" train_stepper.py --database "$work/data/database.bin" \
    --features "$work/data/features.bin" --latent "$work/decompressor/latent.bin" --device "$device" \
    --recipe fast --iterations "${STEPPER_ITERATIONS:-3000}" --out "$work/stepper" --quiet
seconds_of evaluate-stepper "$python" -c 'from motion_matching.cli import main; main()' evaluate-stepper \
    --stepper "$work/stepper/stepper.bin" --database "$work/data/database.bin" \
    --features "$work/data/features.bin" --latent "$work/decompressor/latent.bin" \
    --decompressor "$work/decompressor/decompressor.bin" --out "$out/stepper" --no-plots
