#!/usr/bin/env bash
# CPU decode throughput by KV format: 1, 4 and 16 concurrent rows × bf16 / int8-g64 / int4-g64 KV
# on a random llama-125m (ringlm random-model), plus each format's KV bytes per token (K and V of
# all 12 layers). For docs/benchmarks.md.
#   bench/kv_formats.sh [MODEL_DIR] [GEN=64] [PROMPT_LEN=128]
# Needs a built ringlm (scripts/build).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-build/bench-models/llama-125m}
gen=${2:-64}
prompt_len=${3:-128}
if [ ! -f "$model/model.safetensors" ]; then
  build/ringlm random-model --preset llama-125m --out "$model" --dtype bf16
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) threads), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $model, prompt $prompt_len random tokens, $gen generated per row (greedy), best of 2 after a warm-up"
echo
echo "| rows | KV format | KV bytes/token | decode tok/s (all rows) | prefill tok/s |"
echo "|---|---|---|---|---|"
for rows in 1 4 16; do
  for format in bf16 int8-g64 int4-g64; do
    json=$(build/ringlm bench --model "$model" --batch "$rows" --prompt-len "$prompt_len" \
      --gen "$gen" --repeat 2 --kv-format "$format" --kv-memory 512 --json)
    python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("| %d | %s | %d | %.1f | %.0f |" % (r["batch"], r["kv_format"], r["kv_bytes_per_token"],
                                         r["decode_tok_s"], r["prefill_tok_s"]))
' "$json"
  done
done
