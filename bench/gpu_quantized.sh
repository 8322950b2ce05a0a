#!/usr/bin/env bash
# bench/gpu_quantized.sh OUTDIR — on the GPU machine, after a CUDA build (RINGLM=path to the
# binary, default build-cuda/ringlm). Decode and prefill with MLX affine-quantized weights on CUDA:
# the Llama-3.1-8B shape as bf16 and as 8-bit and 4-bit (group 64) checkpoints with random weights
# (written once by `ringlm random-model`). Batch 1 and 8 run the fused-dequant GEMV (M <= 8),
# batch 16 and prefill the dequantized-tile path. Writes OUTDIR/quantized_decode.jsonl and
# OUTDIR/quantized_prefill.jsonl.
# shellcheck source=bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
dir=${MODEL_ROOT:-/tmp/ringlm-bench}
preset=${PRESET:-llama-3.1-8b}
kv_mib=${KV_MIB:-40000}

random_model "$preset" "$dir/$preset"
random_model "$preset" "$dir/$preset-mlx8" --quantize 8 --group-size 64
random_model "$preset" "$dir/$preset-mlx4" --quantize 4 --group-size 64

: >"$out/quantized_decode.jsonl"
: >"$out/quantized_prefill.jsonl"
for m in "$preset" "$preset-mlx8" "$preset-mlx4"; do
  "$ringlm" bench --model "$dir/$m" --device cuda --kv-memory "$kv_mib" --context 512 \
    --batch 1,8,16 --gen 32 --repeat 2 --json | tee -a "$out/quantized_decode.jsonl"
  "$ringlm" bench --model "$dir/$m" --device cuda --kv-memory 20000 --prompt-len 2048 \
    --batch 1 --gen 2 --repeat 2 --max-step-tokens 8192 --json |
    tee -a "$out/quantized_prefill.jsonl"
done
