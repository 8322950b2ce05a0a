#!/usr/bin/env bash
# bench/kv_quality.sh [OUT.md] — what each KV format costs in quality on real text: the embedded
# models (models/) over the held-out KJV chapters (tools/train/prep_data.py writes them to
# .carry/train-data) in segments of the 512-token training context: perplexity with each KV
# format and the KL divergence of its next-token
# distributions from bf16 KV (the models' own dtype), with top-1 agreement. CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/dev/stdout}
ringlm=${RINGLM:-build/ringlm}
text=${TEXT:-.carry/train-data/text_heldout.jsonl}
[ -f "$text" ] || python3 tools/train/prep_data.py >/dev/null
formats=${FORMATS:-"int8-g64 int8-g32 int4-g64 int4-g32"}
{
  echo "| model | KV format | perplexity | mean KL vs bf16 KV | max KL | top-1 agreement |"
  echo "|---|---|---:|---:|---:|---:|"
  for model in models/ringlm-kjv-llama models/ringlm-kjv-gemma3; do
    for format in bf16 $formats; do
      "$ringlm" perplexity --model "$model" --text-file "$text" --kv-format "$format" \
        --reference-kv-format bf16 --kv-memory 256 --context "${CONTEXT:-512}" --json |
        python3 -c 'import json, sys
r = json.load(sys.stdin)
name = r["model"].split("/")[-1]
print("| %s | %s | %.3f | %.2e | %.2e | %.2f %% |" % (name, r["kv_format"], r["perplexity"],
      r["mean_kl"], r["max_kl"], 100 * r["top1_agreement"]))'
    done
  done
} | tee "$out"
