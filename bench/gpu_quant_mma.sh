#!/usr/bin/env bash
# bench/gpu_quant_mma.sh OUTDIR — on the GPU machine, after a CUDA build (or RINGLM_PREBUILT and
# scripts/gpu-deps.sh sourced): the quantized-weight GPU tests, then a same-binary A/B of the
# tensor-core decode GEMM for MLX weights (backends/cuda/quant_mma.h; A = RINGLM_CUDA_QUANT_MMA=0,
# the f32 GEMVs and dequantized tiles; B = on) on Llama-3.1-8B-shape mlx4 / mlx8 random
# checkpoints (group 64): 512 context at QMMA_BATCHES4 / QMMA_BATCHES8, and mlx4 at 32k with bf16
# and TurboQuant k8v3 K/V (issue 8). QMMA_ROUNDS (default 1) rounds; QMMA_TESTS=0 skips the tests;
# QMMA_ENV_A / QMMA_ENV_B replace the two sides' environments (another switch's same-binary A/B,
# say RINGLM_CUDA_QUANT_MMA_STAGED_SCALES=0 / =1) and QMMA_ENV_C adds a third side; QMMA_ROWS
# replaces the rows (the mlx8 checkpoint is written only when they use it); QMMA_FILTER replaces
# the tests' gtest filter.
# shellcheck source=bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
dir=${MODEL_ROOT:-/tmp/ringlm-bench}
if [ "${QMMA_TESTS:-1}" = 1 ]; then
  timeout 240 build-cuda/ringlm_cuda_tests \
    --gtest_filter="${QMMA_FILTER:-CudaQuant*:GpuQuantizedModel*}" >"$out/quant_tests.log" 2>&1
  echo "quant tests: exit $?"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|error" "$out/quant_tests.log" | head -30
fi
m4="--model $dir/llama-3.1-8b-mlx4" m8="--model $dir/llama-3.1-8b-mlx8"
rows="$m4 --kv-memory 40000 --context 512 --batch ${QMMA_BATCHES4:-1,2,4,8,16};"
rows+="$m8 --kv-memory 40000 --context 512 --batch ${QMMA_BATCHES8:-1,8,16};"
rows+="$m4 --kv-memory 110000 --context 32768 --batch 1,16;"
rows+="$m4 --kv-memory 110000 --context 32768 --batch 1,16 --kv-format turbo"
rows=${QMMA_ROWS:-$rows}
random_model llama-3.1-8b "$dir/llama-3.1-8b-mlx4" --quantize 4 --group-size 64 >/dev/null
if [[ $rows == *mlx8* ]]; then
  random_model llama-3.1-8b "$dir/llama-3.1-8b-mlx8" --quantize 8 --group-size 64 >/dev/null
fi
AB_TESTS=0 AB_ROUNDS=${QMMA_ROUNDS:-1} AB_ENV_A=${QMMA_ENV_A:-RINGLM_CUDA_QUANT_MMA=0} \
  AB_ENV_B=${QMMA_ENV_B:-RINGLM_CUDA_QUANT_MMA=1} AB_EXTRA_ENV=${QMMA_ENV_C:-} AB_ROWS=$rows \
  scripts/gpu-ab "$out/ab"
