#!/usr/bin/env bash
# bench/gpu_sliding.sh OUTDIR — on the GPU machine, after a CUDA build (RINGLM=path to the binary,
# default build-cuda/ringlm). Gemma-3-12B shape (48 layers: 40 sliding with a 1024-token window,
# 8 global; 8 KV heads of 256 dims), random bf16 weights: decode at 32k context for 1 and 32 rows,
# with the KV bytes the rows hold (sliding groups keep only their window) next to an
# all-full-attention cache, and how many such rows the KV budget holds.
# Writes OUTDIR/sliding.jsonl (one `ringlm bench --json` line per shape).
# shellcheck source=bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
model=${MODEL_DIR:-/tmp/ringlm-bench/gemma-3-12b}
random_model gemma-3-12b "$model"
# 24 GB of weights + 90 GB of KV fit the H200's 141 GB.
"$ringlm" bench --model "$model" --device cuda --kv-memory "${KV_MIB:-90000}" --gen 16 \
  --repeat 2 --context 32768 --batch "${BATCH:-1,32}" --json "${@:2}" | tee "$out/sliding.jsonl"
