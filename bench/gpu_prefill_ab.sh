#!/usr/bin/env bash
# bench/gpu_prefill_ab.sh OUTDIR — on the GPU machine, after a CUDA build (or RINGLM_PREBUILT and
# scripts/gpu-deps.sh sourced): prefill on the tensor-core kernel where it used to run on CUDA
# cores — quantized K/V, and head_dim 256 — same binary, B: RINGLM_CUDA_PREFILL_TC_EXTENDED on
# (the default), A: =0. Batch 1, chunks of 2048 tokens (serve's GPU default), random bf16
# weights: the 8B shape with KV formats PREFILL_FORMATS (default int8-g64, int4-g64, turbo; bf16
# once, which the switch does not touch, as the reference), and the Gemma-3-12B shape (head_dim
# 256) with bf16 K/V and turbo. Prompts: PREFILL_LENS (default 512-8192); A stops at
# PREFILL_LENS_A (default 4096: the CUDA-core kernel reads every key once per query head, so
# its long prompts take minutes). PREFILL_MODELS (default "llama gemma") picks the shapes (the
# 12B checkpoint takes ~100 s to write). Prints prefill tokens/s per side and B / A.
# shellcheck source=bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
llama=/tmp/ringlm-bench/llama-3.1-8b
gemma=/tmp/ringlm-bench/gemma-3-12b
models=" ${PREFILL_MODELS:-llama gemma} "
lens_b=${PREFILL_LENS:-512,2048,4096,8192}
lens_a=${PREFILL_LENS_A:-512,2048,4096}
run() {  # side, model, kv format
  local lens=$lens_a on=0
  [ "$1" = b ] && lens=$lens_b on=1
  env RINGLM_CUDA_PREFILL_TC_EXTENDED=$on timeout 400 "$ringlm" bench --model "$2" --device cuda \
    --kv-memory 40000 --max-step-tokens 2048 --prompt-len "$lens" --batch 1 --gen 2 --repeat 2 \
    --kv-format "$3" --json >>"$out/prefill_$1.jsonl" 2>>"$out/prefill_$1.log" ||
    echo "$1 $(basename "$2") $3: failed (exit $?)"
}
if [[ $models == *" llama "* ]]; then
  random_model llama-3.1-8b "$llama" >/dev/null
  run b "$llama" bf16
  for format in ${PREFILL_FORMATS:-int8-g64 int4-g64 turbo}; do
    run a "$llama" "$format"
    run b "$llama" "$format"
  done
fi
if [[ $models == *" gemma "* ]]; then
  random_model gemma-3-12b "$gemma" >/dev/null
  for format in bf16 turbo; do
    run a "$gemma" "$format"
    run b "$gemma" "$format"
  done
fi
python3 - "$out" <<'EOF'
import json, sys
rows = {}
for side in "ab":
    try:
        lines = open(f"{sys.argv[1]}/prefill_{side}.jsonl")
    except OSError:
        continue
    for line in lines:
        r = json.loads(line)
        key = (r["model_type"], r["kv_format"], r["prompt_len"])
        rows.setdefault(key, {})[side] = r["prefill_tok_s"]
print(f"{'model':>12} {'kv':>10} {'prompt':>7} {'A tok/s':>10} {'B tok/s':>10} {'B/A':>6}")
for (model, kv, n), s in sorted(rows.items()):
    a, b = s.get("a"), s.get("b")
    ratio = f"{b / a:6.2f}" if a and b else ""
    print(f"{model:>12} {kv:>10} {n:>7} {a or float('nan'):>10.1f} {b or float('nan'):>10.1f} {ratio}")
EOF
