// Device pieces shared by the dense and the quantized decode GEMVs (gemv.cu, quant_matmul.cu):
// loading 8 values of an x row, and the block's fixed-order reduction of per-thread partial sums
// into y. Both kernels split K over the threads of a block; each thread holds one f32 partial sum
// per (row m, column c) of the block's tile.
#pragma once

#include <cstdint>

#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda::device {

// v[j] = p[j] for j < 8. `vec`: p is 16-byte aligned (two float4 loads through the read-only
// path); otherwise eight scalar loads.
__device__ __forceinline__ void load_x8(const float* p, bool vec, float (&v)[8]) {
  if (vec) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    const float4 b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = __ldg(p + j);
  }
}

// Sums acc[m][c] over the block's THREADS threads — a butterfly within each warp, then the warps'
// sums in warp order — into smem[(THREADS / 32) · M · C + m · C + c], then a barrier. The order
// is fixed by THREADS alone. smem: (THREADS / 32 + 1) · M · C floats. Every thread calls.
template <int M, int C, int THREADS>
__device__ __forceinline__ void reduce_tile(float (&acc)[M][C], float* smem) {
  constexpr int kWarps = THREADS / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float v = warp_sum(acc[m][c]);
      if (lane == 0) smem[warp * (M * C) + m * C + c] = v;
    }
  }
  __syncthreads();
  const int i = static_cast<int>(threadIdx.x);
  if (i < M * C) {
    float s = smem[i];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) s += smem[w * (M * C) + i];
    smem[kWarps * (M * C) + i] = s;
  }
  __syncthreads();
}

// reduce_tile, then y[m, n0 + c] = sum (+ bias[n0 + c]) for n0 + c < N; `accumulate`:
// y[m, n0 + c] += that value (one f32 add, as add_inplace of the stored value would do).
template <int M, int C, int THREADS>
__device__ __forceinline__ void reduce_tile_to_y(float (&acc)[M][C], float* smem, int64_t n0,
                                                 int64_t N, AnyFloat bias, float* y, int64_t ldy,
                                                 bool accumulate = false) {
  reduce_tile<M, C, THREADS>(acc, smem);
  const int i = static_cast<int>(threadIdx.x);
  if (i < M * C) {
    const int m = i / C, c = i % C;
    const float s = smem[(THREADS / 32) * (M * C) + i];
    const int64_t n = n0 + c;
    if (n < N) {
      const float v = bias.p == nullptr ? s : s + bias[n];
      float* dst = y + m * ldy + n;
      *dst = accumulate ? *dst + v : v;
    }
  }
}

}  // namespace ringlm::cuda::device
