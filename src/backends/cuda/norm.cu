// rms_norm and add_inplace on the GPU.
//
// rms_norm: one block per row; the f32 sum of squares is reduced in a fixed order for the row
// length (batch invariant), then r = 1 / sqrt(mean + eps) with IEEE sqrt and division, and
// out = x · r · w (Gemma: · (1 + w)). Each thread reads and writes only its own elements after the
// reduction, so out may alias x.
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda {

namespace {

template <typename W>
__global__ void rms_norm_kernel(const float* x, int64_t ldx, const W* weight, int64_t H, float eps,
                                bool unit_offset, float* out, int64_t ld_out) {
  __shared__ float smem[33];
  const float* row = x + blockIdx.x * ldx;
  float sumsq = 0.0f;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) sumsq += row[h] * row[h];
  sumsq = device::block_sum(sumsq, smem);
  const float r = 1.0f / sqrtf(sumsq / static_cast<float>(H) + eps);
  float* dst = out + blockIdx.x * ld_out;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
    const float w = device::to_f32(weight[h]);
    dst[h] = row[h] * r * (unit_offset ? 1.0f + w : w);
  }
}

__global__ void add_kernel(float* x, int64_t ldx, const float* y, int64_t ldy, int64_t M,
                           int64_t H) {
  const int64_t total = M * H;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / H, h = i % H;
    x[m * ldx + h] += y[m * ldy + h];
  }
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, const ops::RmsNormConfig& config,
              Tensor& out) {
  const int64_t M = x.shape[0], H = x.shape[1];
  if (M == 0) return;
  RINGLM_CHECK(M <= INT32_MAX, "rms_norm: too many rows: ", M);
  Context& ctx = Context::get();
  device::dispatch_float(weight.dtype, [&]<typename W>(W*) {
    rms_norm_kernel<W><<<static_cast<unsigned>(M), device::row_threads(H), 0, ctx.stream()>>>(
        x.ptr<const float>(), x.strides[0], weight.ptr<const W>(), H, config.eps,
        config.unit_offset, out.ptr<float>(), out.strides[0]);
  });
  check_launch("rms_norm_kernel");
}

void add_inplace(Tensor& x, const Tensor& y) {
  const int64_t M = x.shape[0], H = x.shape[1];
  if (M == 0 || H == 0) return;
  Context& ctx = Context::get();
  add_kernel<<<device::grid_for(M * H), device::kThreads, 0, ctx.stream()>>>(
      x.ptr<float>(), x.strides[0], y.ptr<const float>(), y.strides[0], M, H);
  check_launch("add_kernel");
}

}  // namespace ringlm::cuda
