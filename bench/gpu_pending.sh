#!/usr/bin/env bash
# bench/gpu_pending.sh — one device call for switched-off CUDA paths: stream_gemm (TMA + wgmma
# stream-K for 17-256 decode rows, RINGLM_CUDA_STREAM_GEMM=1) and eight-warp decode-attention
# blocks (RINGLM_CUDA_DECODE_WARPS=8), written in the twenty-second and twenty-third sessions and
# first measured in the twenty-fifth (docs/benchmarks.md: both stay off); kept as the call that
# re-measures them after a change. Runs on the GPU machine over a tree carrying a scripts/gpu-pack
# archive (here: `scripts/gpu-pack .carry/prebuilt-b.tar.xz`, carry [".carry"]), in order, so
# that a call cut short still returns the first parts under $OUT:
#   1. their GPU tests (CudaStreamGemm*, *EightWarp*; a hang — the stream-K reduction spins on
#      counters — stops the script before any benchmark);
#   2. gemm_bench: stream_gemm against cublasGemmEx per decode shape (and with 128-row tiles
#      when NARROW_BENCH=1);
#   3. scripts/gpu-ab, same binary: A = the defaults (cuBLAS, four warps), B = stream_gemm,
#      C = eight warps; rows ROWS (default: k8v3 32k × 1/16, bf16 512 × 1/8/64/128/256, bf16
#      32k × 1/8), one round, at most LIMIT seconds;
#   4. unless SECOND_BEFORE seconds have passed: eight warps with one part at short context
#      (RINGLM_CUDA_DECODE_MIN_SPLIT=512 / 1024) against the defaults at 512 and 4k × 1/8.
# STAGES (default "tests gemm ab ab2") picks the parts; the tests, when picked, run before the
# benchmarks (a hang must stop them). Stages ab8 and absg (after the tests) are ab in two shorter
# parts: eight warps over the 1-16-row rows, stream_gemm over 512 × 64/128/256. Stage `mlx4`
# (after ab, before ab2; "tests gemm ab mlx4" fits one 600 s call without ab2) writes a random
# 4-bit (MLX, group 64) 8B checkpoint and runs issue 8's point where the weights no longer hide
# the K/V: 32k × 1/16 with k8v3 and bf16 K/V (× 1/8 on an H100), A = four warps, B = eight.
# Stages that need no tests (twenty-sixth session): `ncu` (per-SASS-instruction profiles of the
# one-row k8v3 decode kernel and quant_mma, first), `suite` (the whole GPU suite) and `warpx`
# (quant_mma's A/B over mlx4/mlx8 checkpoints: WARPX_* settings below; `warpx2` a second one in
# the same call: WARPX2_*), e.g.
# `STAGES="suite warpx" bench/gpu_pending.sh`. Stage `tiles` (twenty-eighth session):
# the 97+-row 4-bit steps' dequantized tile size (below). A second archive for side A
# (WARPX_PREBUILT_A) fits the 64 MiB carry only with just ./ringlm and ./PACKED in it and
# tests/fixtures out of the index (`git rm -r -q --cached tests/fixtures models`, both in
# .git/info/exclude; `git reset -q -- tests/fixtures models` after the call).
# No `| tail` after it in the device command: a command stopped at its limit loses its pipe.
cd "$(dirname "$0")/.." || exit 1
start=$(date +%s)
out=${OUT:?set OUT to the output folder}
work=/tmp/gpu_pending  # gpu-ab's logs: $OUT brings back at most 8 files
mkdir -p "$work"
elapsed() { echo "[$(($(date +%s) - start)) s] $*"; }
mlx4=/tmp/ringlm-bench/llama-3.1-8b-mlx4
mlx8=/tmp/ringlm-bench/llama-3.1-8b-mlx8
# mlx_model DIR BITS: a random BITS-bit (MLX, group 64) 8B checkpoint at DIR, written once.
mlx_model() {
  [ -f "$1/config.json" ] && return 0
  build-cuda/ringlm random-model --preset llama-3.1-8b --out "$1" --dtype bf16 \
    --quantize "$2" --group-size 64 >"$work/mlx$2_model.txt" 2>&1
  elapsed "random-model mlx$2: exit $?"
}
mlx4_model() { mlx_model "$mlx4" 4; }
# timed_ab SECONDS NAME: scripts/gpu-ab (its AB_* settings from the environment) into $work/NAME,
# its report in $OUT/NAME.txt; when the limit stops it, the table of the rows it finished.
timed_ab() {
  timeout "$1" scripts/gpu-ab "$work/$2" >"$out/$2.txt" 2>&1
  local rc=$?
  if [ $rc = 124 ]; then
    echo "stopped at $1 s; the rows done:" >>"$out/$2.txt"
    python3 bench/ab_compare.py "$work/$2"/[abc].jsonl >>"$out/$2.txt" 2>&1
  fi
  elapsed "gpu-ab $2: exit $rc" >>"$out/$2.txt"
  cat "$out/$2.txt"
}
export RINGLM_PREBUILT=${RINGLM_PREBUILT:-.carry/prebuilt-b.tar.xz}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
mkdir -p build-cuda && tar -xJf "$RINGLM_PREBUILT" -C build-cuda
export LD_LIBRARY_PATH="$PWD/build-cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cat build-cuda/PACKED

stages=" ${STAGES:-tests gemm ab ab2} "
kv=56000
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && kv=110000
# Stage ncu (no tests needed): per-SASS-instruction executed counts and stall samples
# (bench/ncu_sass.sh) of the one-row kernels whose instruction streams bound them — the k8v3
# decode kernel at 32k × 1 and quant_mma at 512 × 1, both over the random mlx4 8B checkpoint —
# into $OUT/ncu_NAME.txt with the whole SASS page as ncu_NAME.csv.xz, for reading offline.
if [[ $stages == *" ncu "* ]]; then
  mlx4_model
  ncu_one() {  # NAME KERNEL_REGEX bench args...
    local name=$1 kernel=$2
    shift 2
    timeout 150 bench/ncu_sass.sh "$work/ncu_$name" "$kernel" --model "$mlx4" --gen 4 \
      --repeat 1 "$@" >"$out/ncu_$name.txt" 2>&1
    elapsed "ncu $name: exit $?" >>"$out/ncu_$name.txt"
    xz -6c "$work/ncu_$name/sass.csv" >"$out/ncu_$name.csv.xz" 2>/dev/null
    head -60 "$out/ncu_$name.txt"
  }
  [ "${NCU_K8V3:-1}" = 1 ] &&
    ncu_one k8v3 decode_turbo_k8v3 --kv-memory "$kv" --context 32768 --batch 1 --kv-format turbo
  # The third quant_mma launch: layer 0's gate/up of the first decode step (512-row prefill
  # GEMMs are cuBLAS's); NCU_QMMA_BATCHES (default 1) the decode rows, one profile each, and with
  # NCU_QMMA_ENV (e.g. RINGLM_CUDA_QUANT_MMA_HALF_X=1) a second profile of each in that
  # environment (ncu_qmmaROWS_env.txt).
  for rows in ${NCU_QMMA_BATCHES:-1}; do
    RINGLM_NCU_SKIP=2 ncu_one "qmma$rows" quant_mma_kernel --kv-memory 40000 --context 512 \
      --batch "$rows"
    if [ -n "${NCU_QMMA_ENV:-}" ]; then
      (
        # shellcheck disable=SC2086  # NCU_QMMA_ENV is a list of NAME=VALUE words
        export $NCU_QMMA_ENV
        RINGLM_NCU_SKIP=2 ncu_one "qmma${rows}_env" quant_mma_kernel --kv-memory 40000 \
          --context 512 --batch "$rows"
      )
    fi
  done
fi

# The tests (stage tests) stop the script on a hang, before any benchmark.
stream_gemm=1
if [[ $stages == *" tests "* ]]; then
  RINGLM_CUDA_STREAM_GEMM=1 timeout "${SG_SECONDS:-75}" build-cuda/ringlm_cuda_tests \
    --gtest_filter='CudaStreamGemm*:*EightWarp*' >"$out/tests.log" 2>&1
  tests=$?
  elapsed "tests: exit $tests"
  grep -E "^\[  |Failure|Expected|Which is|error" "$out/tests.log" | head -60
  if [ $tests = 124 ]; then
    tail -3 "$out/tests.log"
    echo "a test hung: no benchmarks"
    exit 1
  fi
  grep -q "FAILED  \] CudaStreamGemm" "$out/tests.log" && stream_gemm=0
fi

# Stage suite: the whole GPU test suite (a failure is reported; the benchmarks still run).
if [[ $stages == *" suite "* ]]; then
  timeout "${SUITE_SECONDS:-300}" build-cuda/ringlm_cuda_tests >"$out/suite.log" 2>&1
  elapsed "GPU suite: exit $?"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" "$out/suite.log" | head -20
fi

# Stage warpx: the 1-16-row quant_mma (MLX 4-bit decode GEMM) — its tests with the warp-private
# pages on, then scripts/gpu-ab over a random mlx4 8B checkpoint at 512 x 1/2/8/16 and 32k x 1
# (k8v3 and bf16 K/V), and a random mlx8 checkpoint at 512 x 2/8/16. Sides: A =
# WARPX_PREBUILT_A (another gpu-pack archive; else this tree) with WARPX_ENV_A, B = this tree's
# defaults, C (when WARPX_ENV_C is set) = this tree with WARPX_ENV_C. The twenty-sixth session
# measured the warp-private pages and the x copies through L1 here. WARPX_ROWS replaces the rows
# (MLX4 and MLX8 in it stand for the checkpoints' folders).
if [[ $stages == *" warpx "* ]]; then
  RINGLM_CUDA_QUANT_MMA_WARP_X=1 timeout 120 build-cuda/ringlm_cuda_tests \
    --gtest_filter='CudaQuantMma*' >"$out/warpx_tests.log" 2>&1
  elapsed "quant_mma tests: exit $?"
  grep -E "^\[  (FAILED|PASSED) |Failure" "$out/warpx_tests.log" | head -20
  mlx4_model
  rows="--model $mlx4 --kv-memory 40000 --context 512 --batch 1,2,4,8,12,16;"
  rows+="--model $mlx4 --kv-memory $kv --context 32768 --batch 1 --kv-format turbo;"
  rows+="--model $mlx4 --kv-memory $kv --context 32768 --batch 1;"
  rows+="--model $mlx8 --kv-memory 40000 --context 512 --batch 2,8,16"
  [ -n "${WARPX_ROWS:-}" ] && rows=${WARPX_ROWS//MLX4/$mlx4} && rows=${rows//MLX8/$mlx8}
  [[ $rows == *"$mlx8"* ]] && mlx_model "$mlx8" 8
  AB_PREBUILT_A=${WARPX_PREBUILT_A:-} AB_TESTS=0 AB_ROUNDS=${ROUNDS:-2} \
    AB_ENV_A="${WARPX_ENV_A:-RINGLM_CUDA_QUANT_MMA_WARP_X=0}" AB_ENV_B="" \
    AB_EXTRA_ENV="${WARPX_ENV_C:-}" \
    AB_ROWS="$rows" timed_ab "${LIMIT_WARPX:-150}" warpx
fi

# Stage warpx2 (thirtieth session): a second quant_mma A/B in the same call (a device start can
# cost minutes), after warpx's: this tree on every side, A = WARPX2_ENV_A (default: the
# defaults, so B/A is the noise), B = the defaults, C = WARPX2_ENV_C; rows WARPX2_ROWS (required;
# MLX4 / MLX8 as in WARPX_ROWS), at most LIMIT_WARPX2 seconds; the report in $OUT/warpx2.txt.
if [[ $stages == *" warpx2 "* ]]; then
  mlx4_model
  rows=${WARPX2_ROWS:?stage warpx2 needs WARPX2_ROWS}
  rows=${rows//MLX4/$mlx4} && rows=${rows//MLX8/$mlx8}
  [[ $rows == *"$mlx8"* ]] && mlx_model "$mlx8" 8
  AB_TESTS=0 AB_ROUNDS=${ROUNDS:-2} AB_ENV_A="${WARPX2_ENV_A:-RINGLM_NOOP=1}" AB_ENV_B="" \
    AB_EXTRA_ENV="${WARPX2_ENV_C:-}" AB_ROWS="$rows" timed_ab "${LIMIT_WARPX2:-150}" warpx2
fi

# Stage tiles (twenty-eighth session): the dequantized column tiles that 4-bit steps of 97+ rows
# hand to cuBLAS, at the default 64 MiB (A) against tiles that stay in L2: B = TILES_B MiB
# (default 16), C = TILES_C (default 8), over the random mlx4 8B checkpoint at 512 × 128 / 256.
if [[ $stages == *" tiles "* ]] && [ "${TILES_TESTS:-1}" = 1 ]; then
  RINGLM_CUDA_DEQUANT_TILE_MIB=1 timeout 120 build-cuda/ringlm_cuda_tests \
    --gtest_filter='CudaQuantMatmul*:*Quantized*' >"$out/tiles_tests.log" 2>&1
  elapsed "quantized tests with 1 MiB tiles: exit $?"
  grep -E "^\[  (FAILED|PASSED) |Failure" "$out/tiles_tests.log" | head -20
fi
if [[ $stages == *" tiles "* ]]; then
  mlx4_model
  rows=${TILES_ROWS:---model MLX4 --kv-memory 40000 --context 512 --batch 128,256}
  AB_TESTS=0 AB_ROUNDS=${ROUNDS:-1} AB_ENV_A="RINGLM_CUDA_DEQUANT_TILE_MIB=64" \
    AB_ENV_B="RINGLM_CUDA_DEQUANT_TILE_MIB=${TILES_B:-16}" \
    AB_EXTRA_ENV="RINGLM_CUDA_DEQUANT_TILE_MIB=${TILES_C:-8}" \
    AB_ROWS="${rows//MLX4/$mlx4}" \
    timed_ab "${LIMIT_TILES:-150}" tiles
fi

# Stages ab8 and absg: each feature against the defaults over the rows it changes only (fewer
# runs than ab's three sides over every row, for a short call).
if [[ $stages == *" ab8 "* ]]; then
  rows8="--kv-memory $kv --context 32768 --batch 1,16 --kv-format turbo;"
  rows8+="--kv-memory $kv --context 512 --batch 1,8;--kv-memory $kv --context 32768 --batch 1,8"
  AB_TESTS=0 AB_ROUNDS=${ROUNDS:-1} AB_ENV_A="RINGLM_CUDA_DECODE_WARPS=4" \
    AB_ENV_B="RINGLM_CUDA_DECODE_WARPS=8" AB_ROWS="$rows8" timed_ab "${LIMIT8:-150}" ab8
fi
if [ $stream_gemm = 1 ] && [[ $stages == *" absg "* ]]; then
  AB_TESTS=0 AB_ROUNDS=${ROUNDS:-1} AB_ENV_A="RINGLM_CUDA_STREAM_GEMM=0" \
    AB_ENV_B="RINGLM_CUDA_STREAM_GEMM=1" \
    AB_ROWS="--kv-memory $kv --context 512 --batch 64,128,256" timed_ab "${LIMITSG:-90}" absg
fi

if [ $stream_gemm = 1 ] && [[ $stages == *" gemm "* ]]; then
  timeout "${GB_SECONDS:-45}" build-cuda/gemm_bench --m "${GB_M:-32,64,128,256}" --algos 4 \
    --iters 40 >"$out/gemm_bench.txt" 2>&1
  elapsed "gemm_bench: exit $?"
  cat "$out/gemm_bench.txt"
  if [ "${NARROW_BENCH:-0}" = 1 ]; then
    RINGLM_CUDA_STREAM_GEMM_WIDE=0 timeout "${GB_SECONDS:-45}" build-cuda/gemm_bench \
      --m 32,64,128 --algos 1 --iters 40 >"$out/gemm_bench_narrow.txt" 2>&1
    elapsed "gemm_bench, 128-row tiles: exit $?"
    cat "$out/gemm_bench_narrow.txt"
  fi
fi

if [[ $stages == *" ab "* ]]; then
  default_rows="--kv-memory $kv --context 32768 --batch 1,16 --kv-format turbo;"
  default_rows+="--kv-memory $kv --context 512 --batch 1,8,64,128,256;"
  default_rows+="--kv-memory $kv --context 32768 --batch 1,8"
  AB_TESTS=0 AB_ROUNDS=${ROUNDS:-1} AB_ENV_A="RINGLM_CUDA_STREAM_GEMM=0" \
    AB_ENV_B="RINGLM_CUDA_STREAM_GEMM=$stream_gemm" \
    AB_EXTRA_ENV="RINGLM_CUDA_STREAM_GEMM=0 RINGLM_CUDA_DECODE_WARPS=8" \
    AB_ROWS="${ROWS:-$default_rows}" timed_ab "${LIMIT:-200}" ab
fi

if [[ $stages == *" mlx4 "* ]]; then
  mlx4_model
  rows="--model $mlx4 --kv-memory $kv --context 32768 --batch 1,16 --kv-format turbo;"
  bf16_batches=1,16  # 26 rows of bf16 K/V at 32k fit 110,000 MiB, 13 fit 56,000 (an H100)
  [ $kv = 110000 ] || bf16_batches=1,8
  rows+="--model $mlx4 --kv-memory $kv --context 32768 --batch $bf16_batches"
  AB_TESTS=0 AB_ROUNDS=${ROUNDS:-1} AB_ENV_A="RINGLM_CUDA_DECODE_WARPS=4" \
    AB_ENV_B="RINGLM_CUDA_DECODE_WARPS=8" AB_ROWS="$rows" \
    timed_ab "${LIMIT_MLX4:-300}" mlx4
fi
[[ $stages == *" ab2 "* ]] || exit 0
[ $(($(date +%s) - start)) -lt "${SECOND_BEFORE:-1000}" ] || exit 0
AB_TESTS=0 AB_ROUNDS=1 AB_ENV_A="RINGLM_CUDA_STREAM_GEMM=0" \
  AB_ENV_B="RINGLM_CUDA_STREAM_GEMM=0 RINGLM_CUDA_DECODE_WARPS=8 RINGLM_CUDA_DECODE_MIN_SPLIT=512" \
  AB_EXTRA_ENV="RINGLM_CUDA_STREAM_GEMM=0 RINGLM_CUDA_DECODE_WARPS=8 RINGLM_CUDA_DECODE_MIN_SPLIT=1024" \
  AB_ROWS="--kv-memory $kv --context 512 --batch 1,8;--kv-memory $kv --context 4096 --batch 1,8" \
  timed_ab "${LIMIT2:-120}" ab2
