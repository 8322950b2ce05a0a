#!/usr/bin/env bash
# CPU decode with MLX-quantized weights: llama-125m with bf16 weights vs the same shapes as MLX
# affine 4-bit and 8-bit (group 64) checkpoints, same machine, same run.
#   bench/cpu_quantized.sh [OUT_DIR]   (models are made there with ringlm random-model)
# Needs a built ringlm (scripts/build).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/bench-models}
mkdir -p "$dir"
[ -f "$dir/llama-125m/model.safetensors" ] ||
  build/ringlm random-model --preset llama-125m --out "$dir/llama-125m" --dtype bf16
for bits in 4 8; do
  [ -f "$dir/llama-125m-mlx$bits/model.safetensors" ] ||
    build/ringlm random-model --preset llama-125m --out "$dir/llama-125m-mlx$bits" --dtype bf16 \
      --quantize "$bits" --group-size 64
done
threads=$(nproc)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') ($threads threads), $(date -u +%F), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in 1 "$threads"; do
  for m in llama-125m llama-125m-mlx8 llama-125m-mlx4; do
    echo -n "$m $(du -sm "$dir/$m/model.safetensors" | cut -f1) MB: "
    build/ringlm bench --model "$dir/$m" --prompt-len 128 --gen 64 --threads "$t" --json
  done
done
