#!/usr/bin/env bash
# bench/gpu_fused_norms.sh OUTDIR — on the GPU machine (RINGLM_PREBUILT and scripts/gpu-deps.sh
# sourced, or a CUDA build): the residual-fusion tests (ops/residual_matmul.h) and the whole GPU
# suite, then same-binary A/Bs of RINGLM_CUDA_FUSED_NORMS=0 (A, add_rms_norm between the blocks)
# against =1 (B, the add and the norm inside the matmuls) — the 8B bf16 model at 512, 4k and 32k
# context (the GEMV's 1-2 rows, and 8 rows where nothing changes). FN_STAGES picks stages
# (default "tests bf16"; "step" adds the per-kernel time of a 512 × 1 step on each side,
# bench/ncu_step.sh); FN_ROUNDS (default 2). FN_SWITCH names the switch the A/B flips (default
# RINGLM_CUDA_FUSED_NORMS; RINGLM_CUDA_FUSED_ROPE: rope and the K/V write in the q/k/v GEMV's
# store, with the norms fused on both sides); FN_ROWS replaces the A/B's benchmark rows
# (scripts/gpu-ab's AB_ROWS).
# shellcheck source=bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
rounds=${FN_ROUNDS:-2}
dir=${MODEL_ROOT:-/tmp/ringlm-bench}
switch=${FN_SWITCH:-RINGLM_CUDA_FUSED_NORMS}
off=$switch=0 on=$switch=1
for stage in ${FN_STAGES:-tests bf16}; do
  case $stage in
    tests)
      timeout 120 build-cuda/ringlm_cuda_tests \
        --gtest_filter='CudaResidualMatmul.*:CudaMatmulPrepareAttention.*:GpuModel.FusedResidual*' >"$out/fused_tests.log" 2>&1 ||
        true
      echo "fused tests:"
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|error" "$out/fused_tests.log" | head -30
      timeout 240 build-cuda/ringlm_cuda_tests >"$out/tests.log" 2>&1 || true
      echo "GPU suite:"
      grep -E "^\[  (FAILED|PASSED|SKIPPED) " "$out/tests.log" | head -20
      ;;
    bf16)
      AB_TESTS=0 AB_ROUNDS=$rounds AB_ENV_A=$off AB_ENV_B=$on \
        AB_ROWS=${FN_ROWS:-"--kv-memory 100000 --context 512 --batch 1,2,8;--kv-memory 110000 --context 4096 --batch 1,2;--kv-memory 110000 --context 32768 --batch 1"} \
        scripts/gpu-ab "$out/bf16" | tail -12
      ;;
    step)
      model=$dir/llama-3.1-8b
      random_model llama-3.1-8b "$model" >/dev/null
      for side in off on; do
        env "$switch=$([ $side = on ] && echo 1 || echo 0)" timeout 200 \
          bench/ncu_step.sh "$out/step_$side.txt" --model "$model" --kv-memory 40000 \
          --context 512 --batch 1 --gen 64 --repeat 1 >/dev/null
        echo "step ($side):"
        head -16 "$out/step_$side.txt"
      done
      ;;
    *) echo "unknown stage $stage" && exit 1 ;;
  esac
done
