#!/usr/bin/env bash
# bench/gpu_l2_prefetch.sh OUTDIR — on the GPU machine (RINGLM_PREBUILT and scripts/gpu-deps.sh
# sourced, or a CUDA build): GpuModel.L2PrefetchChangesNoBits and the whole GPU suite, then a
# same-binary A/B/C of RINGLM_CUDA_L2_PREFETCH_MB (the o projection's weights prefetched into L2
# while a layer's attention runs, cuda::prefetch_l2): A = 0 (off), B = PF_B (default 64: all of
# the 8B shape's 33.5 MB), C = PF_C (default 24) — the 8B bf16 model at 512, 4k and 32k context.
# PF_STAGES (default "tests ab"), PF_ROUNDS (default 2), PF_ROWS replaces the benchmark rows
# (scripts/gpu-ab's AB_ROWS).
# shellcheck source=bench/gpu_common.sh
source "$(dirname "$0")/gpu_common.sh"
for stage in ${PF_STAGES:-tests ab}; do
  case $stage in
    tests)
      timeout 120 build-cuda/ringlm_cuda_tests --gtest_filter='GpuModel.L2Prefetch*' \
        >"$out/prefetch_tests.log" 2>&1 || true
      echo "prefetch test:"
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|error" "$out/prefetch_tests.log" | head -20
      timeout 240 build-cuda/ringlm_cuda_tests >"$out/tests.log" 2>&1 || true
      echo "GPU suite:"
      grep -E "^\[  (FAILED|PASSED|SKIPPED) " "$out/tests.log" | head -20
      ;;
    ab)
      AB_TESTS=0 AB_ROUNDS=${PF_ROUNDS:-2} AB_ENV_A=RINGLM_CUDA_L2_PREFETCH_MB=0 \
        AB_ENV_B=RINGLM_CUDA_L2_PREFETCH_MB=${PF_B:-64} \
        AB_EXTRA_ENV=RINGLM_CUDA_L2_PREFETCH_MB=${PF_C:-24} \
        AB_ROWS=${PF_ROWS:-"--kv-memory 100000 --context 512 --batch 1,2,8,32;--kv-memory 110000 --context 4096 --batch 1,8;--kv-memory 110000 --context 32768 --batch 1"} \
        scripts/gpu-ab "$out/ab" | tail -16
      ;;
    *) echo "unknown stage $stage" && exit 1 ;;
  esac
done
