// Row reductions on the GPU: softmax (one block per row), argmax and the elementwise softcap.
//
// softmax follows the reference: a row holding a NaN, or only -inf, becomes all NaN; otherwise
// out = exp(x - max) / Σ exp(x - max) with the sum reduced in a fixed order per row length.
// argmax: the first NaN wins (torch.argmax); else the largest value, the lowest index on ties;
// two passes, chunks of a row over many blocks, then one warp per row.
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pdl.cuh"

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

// The best of a block's candidates (every thread holds one); thread 0 gets the result.
__device__ Best block_best(Best best, Best* smem /* [32] */) {
  for (int o = 16; o > 0; o >>= 1) {
    const Best other{__shfl_xor_sync(device::kFullMask, best.v, o),
                     __shfl_xor_sync(device::kFullMask, best.i, o)};
    if (beats(other, best)) best = other;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
      if (beats(smem[w], best)) best = smem[w];
  return best;
}

// Pass 1: block (c, m) finds the best of x[m, c·kArgmaxChunk ...) — a vocabulary-wide row spread
// over many SMs (one block per row read a 128k-entry row at a single SM's bandwidth).
constexpr int kArgmaxThreads = 256;
constexpr int64_t kArgmaxChunk = 2048;
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_chunks_kernel(const float* x, int64_t ldx, int64_t N, Best* partials /* [M, chunks] */) {
  __shared__ Best smem[32];
  device::wait_prior_grid();
  device::launch_dependents();
  const float* row = x + blockIdx.y * ldx;
  const int64_t begin = blockIdx.x * kArgmaxChunk, end = min(N, begin + kArgmaxChunk);
  Best best{-INFINITY, INT64_MAX};
  for (int64_t n = begin + threadIdx.x; n < end; n += kArgmaxThreads) {
    const Best c{row[n], n};
    if (beats(c, best)) best = c;
  }
  best = block_best(best, smem);
  if (threadIdx.x == 0) partials[blockIdx.y * gridDim.x + blockIdx.x] = best;
}

// Pass 2: one warp per row picks the best chunk winner (beats() is a total order, so the
// result does not depend on how the chunks were grouped).
__global__ void argmax_rows_kernel(const Best* partials, int chunks, int32_t* out) {
  device::wait_prior_grid();
  device::launch_dependents();
  const Best* row = partials + int64_t{blockIdx.x} * chunks;
  Best best{-INFINITY, INT64_MAX};
  for (int c = static_cast<int>(threadIdx.x); c < chunks; c += 32)
    if (beats(row[c], best)) best = row[c];
  for (int o = 16; o > 0; o >>= 1) {
    const Best other{__shfl_xor_sync(device::kFullMask, best.v, o),
                     __shfl_xor_sync(device::kFullMask, best.i, o)};
    if (beats(other, best)) best = other;
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(best.i);
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
  RINGLM_CHECK(M <= 65535, "argmax: too many rows: ", M);
  const int64_t chunks = (N + kArgmaxChunk - 1) / kArgmaxChunk;
  RINGLM_CHECK(chunks <= INT32_MAX, "argmax: rows of ", N, " values are too long");
  Context& ctx = Context::get();
  auto* partials = static_cast<Best*>(
      ctx.scratch(Scratch::Reduce, static_cast<size_t>(M * chunks) * sizeof(Best)));
  launch_pdl(argmax_chunks_kernel, dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(M)),
             dim3(kArgmaxThreads), 0, ctx.stream(), x.ptr<const float>(), x.strides[0], N,
             partials);
  check_launch("argmax_chunks_kernel");
  launch_pdl(argmax_rows_kernel, dim3(static_cast<unsigned>(M)), dim3(32), 0, ctx.stream(),
             partials, static_cast<int>(chunks), out.ptr<int32_t>());
  check_launch("argmax_rows_kernel");
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
