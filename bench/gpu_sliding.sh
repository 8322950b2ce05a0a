#!/usr/bin/env bash
# bench/gpu_sliding.sh OUTDIR — on the GPU machine, after a CUDA build (RINGLM=path to the binary,
# default build-cuda/ringlm). Gemma-3-12B shape (48 layers: 40 sliding with a 1024-token window,
# 8 global; 8 KV heads of 256 dims), random bf16 weights: decode at 32k context for 1 and 32 rows,
# with the KV bytes the rows hold (sliding groups keep only their window) next to an
# all-full-attention cache, and how many such rows the KV budget holds.
# Writes OUTDIR/sliding.jsonl (one `ringlm bench --json` line per shape).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/gpu_sliding.sh OUTDIR}
mkdir -p "$out"
ringlm=${RINGLM:-build-cuda/ringlm}
model=${MODEL_DIR:-/tmp/ringlm-bench/gemma-3-12b}
if [ ! -f "$model/config.json" ]; then
  /usr/bin/time -f "random-model: %e s" "$ringlm" random-model --preset gemma-3-12b --out "$model" \
    --dtype bf16
fi
# 24 GB of weights + 90 GB of KV fit the H200's 141 GB.
"$ringlm" bench --model "$model" --device cuda --kv-memory "${KV_MIB:-90000}" --gen 16 \
  --repeat 2 --context 32768 --batch "${BATCH:-1,32}" --json "$@" | tee "$out/sliding.jsonl"
