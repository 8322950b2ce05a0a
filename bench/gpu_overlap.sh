#!/usr/bin/env bash
# bench/gpu_overlap.sh OUTDIR — on the GPU machine, after a CUDA build (or RINGLM_PREBUILT and
# scripts/gpu-deps.sh sourced): overlapped steps (EngineConfig::overlap_steps; step N+1 launched
# before step N is collected, its tokens fed on the device) against one step at a time, same
# binary. 1. scripts/gpu-ab with A = RINGLM_OVERLAP_STEPS=0, B = on: the GPU test suite (B), then
# `ringlm bench --context` on the 8B bf16 shape (OVERLAP_ROWS; default 512 × 1..256 and 32k × 1,
# 16), OVERLAP_ROUNDS rounds (default 2). 2. `ringlm serve` (bench/serve_bench.py, 128 prompt +
# 64 generated tokens, SERVE_LEVELS streams, greedy and sampled on the device) with
# --no-overlap-steps and without. OVERLAP_PARTS (default "ab serve") picks the parts: a device
# call runs at most 10 minutes, and both take about that together.
# shellcheck source=bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
model=/tmp/ringlm-bench/llama-3.1-8b  # scripts/gpu-ab's model
random_model llama-3.1-8b "$model" >/dev/null
rows="--kv-memory 100000 --context 512 --batch 1,2,8,32,64,128,256;"
rows+="--kv-memory 110000 --context 32768 --batch 1,16"
parts=" ${OVERLAP_PARTS:-ab serve} "
if [[ $parts == *" ab "* ]]; then
  # Room beyond gpu-ab's default 200 s for the overlap and prefill tests the suite gained.
  TESTS_SECONDS=${TESTS_SECONDS:-300} AB_ROUNDS=${OVERLAP_ROUNDS:-2} \
    AB_ENV_A=RINGLM_OVERLAP_STEPS=0 AB_ENV_B=RINGLM_OVERLAP_STEPS=1 \
    AB_ROWS=${OVERLAP_ROWS:-$rows} scripts/gpu-ab "$out/ab"
fi
[[ $parts == *" serve "* ]] || exit 0
cp tests/fixtures/server_model/tokenizer.json tests/fixtures/server_model/tokenizer_config.json \
  "$model"/
for sampling in "--temperature 0" "--temperature 0.8 --top-p 0.9"; do
  for overlap in --no-overlap-steps ""; do
    echo "serve: $sampling ${overlap:-(overlapped)}"
    # shellcheck disable=SC2086 # $sampling and $overlap are lists of flags
    timeout 240 python3 bench/serve_bench.py --binary "$ringlm" --model "$model" --prompt-len 128 \
      --gen 64 --requests 64 --concurrency "${SERVE_LEVELS:-1,16,64}" $sampling \
      --json "$out/serve.jsonl" -- --device cuda --kv-memory 40000 --max-batch 128 $overlap \
      2>&1 | tail -4
  done
done
