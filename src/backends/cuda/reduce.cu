// Row reductions on the GPU: softmax, argmax (one block per row) and the elementwise softcap.
//
// softmax follows the reference: a row holding a NaN, or only -inf, becomes all NaN; otherwise
// out = exp(x - max) / Σ exp(x - max) with the sum reduced in a fixed order per row length.
// argmax: the first NaN wins (torch.argmax); else the largest value, the lowest index on ties.
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda {

namespace {

__global__ void softmax_kernel(float* x, int64_t ldx, int64_t N) {
  __shared__ float smem[33];
  float* row = x + blockIdx.x * ldx;
  float mx = -INFINITY, nan = 0.0f;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const float v = row[n];
    if (isnan(v)) nan = 1.0f;
    mx = fmaxf(mx, v);
  }
  nan = device::block_max(nan, smem);
  mx = device::block_max(mx, smem);
  if (nan != 0.0f || mx == -INFINITY) {
    for (int64_t n = threadIdx.x; n < N; n += blockDim.x) row[n] = NAN;
    return;
  }
  float sum = 0.0f;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) sum += expf(row[n] - mx);
  sum = device::block_sum(sum, smem);
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) row[n] = expf(row[n] - mx) / sum;
}

struct Best {
  float v;
  int64_t i;
};
// a beats b: NaN beats numbers (the lower index among NaNs), then larger, then lower index.
__device__ __forceinline__ bool beats(const Best& a, const Best& b) {
  const bool an = isnan(a.v), bn = isnan(b.v);
  if (an != bn) return an;
  if (!an && a.v != b.v) return a.v > b.v;
  return a.i < b.i;
}

__global__ void argmax_kernel(const float* x, int64_t ldx, int64_t N, int32_t* out) {
  __shared__ Best smem[32];
  const float* row = x + blockIdx.x * ldx;
  Best best{-INFINITY, INT64_MAX};
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const Best c{row[n], n};
    if (beats(c, best)) best = c;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const Best other{__shfl_xor_sync(device::kFullMask, best.v, o),
                     __shfl_xor_sync(device::kFullMask, best.i, o)};
    if (beats(other, best)) best = other;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
      if (beats(smem[w], best)) best = smem[w];
    out[blockIdx.x] = static_cast<int32_t>(best.i);
  }
}

__global__ void softcap_kernel(float* x, int64_t ldx, int64_t M, int64_t N, float cap) {
  const int64_t total = M * N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    float& v = x[(i / N) * ldx + i % N];
    v = cap * tanhf(v / cap);
  }
}

}  // namespace

void softmax(Tensor& x) {
  const int64_t M = x.shape[0], N = x.shape[1];
  if (M == 0 || N == 0) return;
  RINGLM_CHECK(M <= INT32_MAX, "softmax: too many rows: ", M);
  Context& ctx = Context::get();
  softmax_kernel<<<static_cast<unsigned>(M), device::row_threads(N), 0, ctx.stream()>>>(
      x.ptr<float>(), x.strides[0], N);
  check_launch("softmax_kernel");
}

void argmax(const Tensor& x, Tensor& out) {
  const int64_t M = x.shape[0], N = x.shape[1];
  if (M == 0) return;
  RINGLM_CHECK(M <= INT32_MAX, "argmax: too many rows: ", M);
  Context& ctx = Context::get();
  argmax_kernel<<<static_cast<unsigned>(M), device::row_threads(N), 0, ctx.stream()>>>(
      x.ptr<const float>(), x.strides[0], N, out.ptr<int32_t>());
  check_launch("argmax_kernel");
}

void softcap(Tensor& x, float cap) {
  const int64_t M = x.shape[0], N = x.shape[1];
  if (M == 0 || N == 0) return;
  Context& ctx = Context::get();
  softcap_kernel<<<device::grid_for(M * N), device::kThreads, 0, ctx.stream()>>>(
      x.ptr<float>(), x.strides[0], M, N, cap);
  check_launch("softcap_kernel");
}

}  // namespace ringlm::cuda
