#!/usr/bin/env bash
# CPU decode benchmark: ringlm vs the same model's forward in PyTorch, same machine, same run.
#   bench/cpu_decode.sh [MODEL_DIR]   (default: a random llama-125m made by ringlm random-model)
# Needs a built ringlm (scripts/build) and Debian's python3-torch.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-build/bench-models/llama-125m}
if [ ! -f "$model/model.safetensors" ]; then
  build/ringlm random-model --preset llama-125m --out "$model" --dtype bf16
fi
threads=$(nproc)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') ($threads threads), $(date -u +%F)"
build/ringlm inspect "$model" | head -4
for t in 1 "$threads"; do
  build/ringlm bench --model "$model" --prompt-len 128 --gen 64 --threads "$t" --json
  /usr/bin/python3 bench/torch_llama_cpu.py --model "$model" --prompt-len 128 --gen 64 --threads "$t" --dtype float32
  /usr/bin/python3 bench/torch_llama_cpu.py --model "$model" --prompt-len 128 --gen 64 --threads "$t" --dtype bfloat16
done
