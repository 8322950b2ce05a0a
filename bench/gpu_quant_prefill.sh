#!/usr/bin/env bash
# bench/gpu_quant_prefill.sh OUTDIR — on the GPU machine, after a CUDA build (or RINGLM_PREBUILT
# and scripts/gpu-deps.sh sourced): prefill over quantized K/V on the tensor-core prefill kernel
# (B: RINGLM_CUDA_QUANT_PREFILL_TC on, the default) against the CUDA-core kernel (A: =0), same
# binary, 8B bf16 random weights, batch 1, prompts of PREFILL_LENS tokens (default 512, 2048,
# 4096, 8192; A stops at PREFILL_LENS_A, default 4096: the CUDA-core kernel reads every key once
# per query head, so its long prompts take minutes) in chunks of 2048 (serve's GPU default), KV
# formats PREFILL_FORMATS (default int8-g64, int4-g64 and turbo; bf16 once, as the reference).
# Prints prefill tokens/s per side and B / A.
# shellcheck source=bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
model=/tmp/ringlm-bench/llama-3.1-8b
random_model llama-3.1-8b "$model" >/dev/null
lens_b=${PREFILL_LENS:-512,2048,4096,8192}
lens_a=${PREFILL_LENS_A:-512,2048,4096}
run() {  # side, kv format
  env RINGLM_CUDA_QUANT_PREFILL_TC="$([ "$1" = b ] && echo 1 || echo 0)" timeout 400 \
    "$ringlm" bench --model "$model" --device cuda --kv-memory 40000 --max-step-tokens 2048 \
    --prompt-len "$([ "$1" = b ] && echo "$lens_b" || echo "$lens_a")" --batch 1 --gen 2 --repeat 2 --kv-format "$2" --json \
    >>"$out/prefill_$1.jsonl" 2>>"$out/prefill_$1.log" || echo "$1 $2: failed (exit $?)"
}
run b bf16
for format in ${PREFILL_FORMATS:-int8-g64 int4-g64 turbo}; do
  run a "$format"
  run b "$format"
done
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
        rows.setdefault((r["kv_format"], r["prompt_len"]), {})[side] = r["prefill_tok_s"]
print(f"{'kv':>10} {'prompt':>7} {'A tok/s':>10} {'B tok/s':>10} {'B/A':>6}")
for (kv, n), s in sorted(rows.items()):
    a, b = s.get("a"), s.get("b")
    ratio = f"{b / a:6.2f}" if a and b else ""
    print(f"{kv:>10} {n:>7} {a or float('nan'):>10.1f} {b or float('nan'):>10.1f} {ratio}")
EOF
