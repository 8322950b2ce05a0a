// The decode GEMM for 16-bit weights at a few dozen to 256 rows (stream_gemm.cu), behind
// matmul.cu's gemm() in place of cuBLAS. Internal to backends/cuda; plain C++.
//
// Why: at 17-256 rows a decode step's matmuls stream every weight once and do little arithmetic
// per byte (M·2 FLOP per 16-bit weight: under the H200's ~200 FLOP/byte ridge up to ~100 rows),
// so they should run at the copy bandwidth. cuBLAS reached 2.5-3.5 TB/s of the H200's 4.27 at
// these shapes (docs/benchmarks.md): a grid of tiles quantized into waves, no programmatic
// dependent launch, a second kernel for split-K sums. This kernel is Hopper's shape for it:
// weights copied by TMA into a ring of shared-memory stages (issued by thread 0), two warpgroups
// multiplying with wgmma, and "stream-K" work division — the (tile, 64-wide k chunk) units are
// cut into one equal contiguous range per SM, so every SM streams the same number of weight
// bytes to the end; the parts of a tile cut between SMs are added by all of them together, a
// slice each, once every SM's range is done. Its first stages' weight copies start before the
// previous kernel has finished.
// First version measured (H100, 2026-12-06): correct, but the decode step ran at 0.91 / 0.88 /
// 0.76 / 0.65× of cuBLAS's speed at 32 / 64 / 128 / 256 rows. Three causes found since, all
// changed in the 2026-12-07 version (not yet measured; off by default, RINGLM_CUDA_STREAM_GEMM=1
// turns it on): each chunk's MMAs drained before the next were issued (now one group stays in
// flight: wgmma.wait_group 1, a stage refilled a chunk later; ptxas's -v report must show no
// "wgmma.mma_async instructions are serialized", which scripts/test checks); the last SM of a cut
// tile read every part alone while the others idled (a 512 KB read at 256 rows; now a slice each);
// and x's rows were copied from L2 once per 128 weight rows (now per 256 up to 128 rows).
//
// Precision: the dense GPU matmul's contract (cuda_ops.h): x and w 16-bit, exact products, f32
// accumulation. Row m of y depends only on x[m], (N, K) and the tile width: the cut of K into
// parts depends on the shape, the tile width and the GPU's multiprocessor count, never on M
// otherwise, and parts are added in k order. So a row is the same bits at every M served with
// one tile width — 17..128 and 129..256 with wide tiles, 17..256 without (stream_gemm_test.cc).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace ringlm::cuda {

constexpr int64_t kStreamGemmMaxRows = 256;

struct StreamGemm {
  const void* x;  // BF16|F16[M, K], row stride ldx (elements)
  int64_t ldx;
  const void* w;  // BF16|F16[N, K] (the same dtype), contiguous
  DType dtype;
  int64_t M, N, K;
  float* y;  // F32[M, N], row stride ldy: y = x · wᵀ, or y += x · wᵀ when accumulate
  int64_t ldy;
  bool accumulate;
};

// Whether stream_gemm() serves this call: a Hopper GPU (sm_90), BF16 or F16, M in
// [stream_gemm_min_rows(), kStreamGemmMaxRows], K and ldx multiples of 8, 16-byte aligned x and
// w, and the kernel switched on.
bool stream_gemm_applies(const StreamGemm& g);
// Whether this process's GPU runs the kernel at all (compute capability 9.0).
bool stream_gemm_device_supported();
// Runs `g` on the context's stream (stream_gemm_applies must hold).
void stream_gemm(const StreamGemm& g);

// Off unless RINGLM_CUDA_STREAM_GEMM=1 or set_stream_gemm(true) until a GPU run has measured it
// (tests, same-binary A/Bs; CUDA graphs captured before keep what they captured).
bool stream_gemm_enabled();
void set_stream_gemm(bool enabled);
// The fewest rows it serves: RINGLM_CUDA_STREAM_GEMM_MIN_ROWS, else 17 (fewer go to cuBLAS).
int64_t stream_gemm_min_rows();
void set_stream_gemm_min_rows(int64_t rows);
// Tiles of 256 weight rows for calls of at most 128 rows (else 128): RINGLM_CUDA_STREAM_GEMM_WIDE=0
// turns them off (same-binary A/B). A row's bits are the same at every M within 17..128 and
// within 129..256 (the cut of K follows the tile width).
bool stream_gemm_wide_tiles();
void set_stream_gemm_wide_tiles(bool wide);
// Calls stream_gemm() has run in this process (tests check which path a matmul took).
int64_t stream_gemm_count();

}  // namespace ringlm::cuda
