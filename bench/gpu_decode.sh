#!/usr/bin/env bash
# bench/gpu_decode.sh OUTDIR — on the GPU machine, after a CUDA build (RINGLM=path to the binary,
# default build-cuda/ringlm). Decode throughput of a Llama-3.1-8B-shaped bf16 checkpoint with
# random weights (written once by `ringlm random-model`), for B x context, with the bytes each
# step must read and the fraction of the H200's measured copy bandwidth (4.27 TB/s); then the same
# shape through PyTorch + transformers (compiled StaticCache generate) in the same run.
# Writes OUTDIR/ringlm_decode.jsonl, OUTDIR/torch_decode.jsonl and OUTDIR/decode.md.
# shellcheck source=bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
model=${MODEL_DIR:-/tmp/ringlm-bench/llama-3.1-8b}
preset=${PRESET:-llama-3.1-8b}
kv_mib=${KV_MIB:-100000}

random_model "$preset" "$model"
bench() { "$ringlm" bench --model "$model" --device cuda --kv-memory "$kv_mib" --gen 32 \
  --repeat 2 --json "$@"; }
# GRID: "CONTEXT:BATCHES ..." (a shorter grid for a short device call); SKIP_PREFILL=1.
grid=${GRID:-512:1,8,32,64,128,256 4096:1,8,32,64,128 32768:1,8,16}
for point in $grid; do
  bench --context "${point%%:*}" --batch "${point#*:}"
done | tee "$out/ringlm_decode.jsonl"
if [ "${SKIP_PREFILL:-0}" != 1 ]; then
  "$ringlm" bench --model "$model" --device cuda --kv-memory 20000 --prompt-len 512,2048 \
    --batch 1 --gen 2 --repeat 2 --max-step-tokens 8192 --json | tee "$out/ringlm_prefill.jsonl" ||
    true
fi
if [ "${SKIP_TORCH:-0}" != 1 ]; then
  timeout "${TORCH_SECONDS:-1800}" python3 bench/torch_gpu_decode.py --model "$model" \
    --batch "${TORCH_BATCH:-1,8,32}" --mode compiled | tee "$out/torch_decode.jsonl" ||
    echo "torch reference failed or stopped at TORCH_SECONDS" >&2
fi
python3 bench/decode_table.py "$out" | tee "$out/decode.md"
