// The arithmetic of RMS norm and rotary embedding, shared by the kernels that apply them
// (norm.cu, rope.cu, attention_inputs.cu) so a fused kernel produces the same bits as the
// separate ones. Multiply-adds are spelled out (__fmul_rn / __fmaf_rn): the compiler's
// contraction of `a * b + c` may differ between kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda::device {

// x² + y² + z² + w² of a thread's float4, in this order.
__device__ __forceinline__ float square_sum(float4 v) {
  float s = __fmul_rn(v.x, v.x);
  s = __fmaf_rn(v.y, v.y, s);
  s = __fmaf_rn(v.z, v.z, s);
  return __fmaf_rn(v.w, v.w, s);
}

// The one-pass RMSNorm's layout (norm.cu's rms_norm_vec_kernel), shared with the decode GEMV
// that normalizes its input on the way in (gemv.cu) so both sum a row's squares in the same
// order: a row of 4·n4 floats, thread t of `threads` holds float4s t, t + threads, ... (at most
// kNormMaxVecs), sums their square_sum in that order, then block_sum over the threads.
constexpr int kNormVecThreads = 512;  // rows up to 16384 floats
constexpr int kNormMaxVecs = 8;
// Threads of that layout for a row of H floats: a multiple of 32 in [32, kNormVecThreads].
__host__ __device__ constexpr int norm_vec_threads(long long H) {
  const long long per_thread = (H / 4 + kNormMaxVecs - 1) / kNormMaxVecs;
  const long long threads = (per_thread + 31) / 32 * 32;
  return threads < 32 ? 32
                      : (threads > kNormVecThreads ? kNormVecThreads : static_cast<int>(threads));
}
// Thread `t`'s share of the row's sum of squares in that layout (0 for t >= threads).
__device__ __forceinline__ float norm_vec_partial(const float4* row, int n4, int threads, int t) {
  float sumsq = 0.0f;
  if (t >= threads) return sumsq;
#pragma unroll
  for (int i = 0; i < kNormMaxVecs; ++i) {
    const int idx = t + i * threads;
    const float4 v = idx < n4 ? row[idx] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    sumsq += square_sum(v);
  }
  return sumsq;
}

// 1 / sqrt(mean of squares + eps), IEEE sqrt and division.
__device__ __forceinline__ float rms_scale(float sumsq, float n, float eps) {
  return 1.0f / sqrtf(sumsq / n + eps);
}

// x · r · w (Gemma: · (1 + w)).
__device__ __forceinline__ float rms_apply(float x, float r, float w, bool unit_offset) {
  return __fmul_rn(__fmul_rn(x, r), unit_offset ? 1.0f + w : w);
}

// 1 / rms of rows 0 .. rows - 1 of x (F32, 16-byte aligned rows of H = 4·n4 floats, ldx apart)
// into out[m], bit for bit what rms_norm_vec_kernel computes for each row: the calling block's
// warps play the layout's norm_vec_threads(H) threads (warp w takes the layout's warps w,
// w + warps, ...), each layout warp's sum is its butterfly (warp_sum), and the first warp adds the
// layout warps' sums by the same butterfly, zeros past them — block_sum's order. Every thread of
// the block (blockDim.x a multiple of 32) calls it; out is visible to all on return.
// smem: 32 · MAX_ROWS floats.
template <int MAX_ROWS>
__device__ __forceinline__ void norm_vec_row_scales(const float* x, int64_t ldx, int rows, int H,
                                                    float eps, float* smem, float* out) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  const int threads = norm_vec_threads(H), layout_warps = threads / 32, n4 = H / 4;
#pragma unroll
  for (int m = 0; m < MAX_ROWS; ++m) {
    if (m >= rows) break;
    const auto* row = reinterpret_cast<const float4*>(x + m * ldx);
    for (int lw = warp; lw < layout_warps; lw += warps) {
      const float part = warp_sum(norm_vec_partial(row, n4, threads, 32 * lw + lane));
      if (lane == 0) smem[32 * m + lw] = part;
    }
  }
  __syncthreads();
  if (warp == 0) {
    for (int m = 0; m < rows; ++m) {
      const float total = warp_sum(lane < layout_warps ? smem[32 * m + lane] : 0.0f);
      if (lane == 0) out[m] = rms_scale(total, static_cast<float>(H), eps);
    }
  }
  __syncthreads();
}

// cos and sin of pos · inv_freq in f32 (full-range cosf / sinf), times attention_scaling.
__device__ __forceinline__ void rope_cos_sin(float pos, float inv_freq, float scaling, float& c,
                                             float& s) {
  const float angle = __fmul_rn(pos, inv_freq);
  c = __fmul_rn(cosf(angle), scaling);
  s = __fmul_rn(sinf(angle), scaling);
}

// The "rotate_half" pair (x1 = x[i], x2 = x[i + d/2]) → (x1·c − x2·s, x2·c + x1·s).
__device__ __forceinline__ void rope_rotate(float& x1, float& x2, float c, float s) {
  const float a = x1, b = x2;
  x1 = __fmaf_rn(a, c, -__fmul_rn(b, s));
  x2 = __fmaf_rn(b, c, __fmul_rn(a, s));
}

}  // namespace ringlm::cuda::device
