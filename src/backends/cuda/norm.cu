// rms_norm, add_inplace and the two fused (add_rms_norm) on the GPU.
//
// rms_norm: one block per row; the f32 sum of squares is reduced in a fixed order for the row
// length (batch invariant), then r = 1 / sqrt(mean + eps) with IEEE sqrt and division, and
// out = x · r · w (Gemma: · (1 + w)). Each thread reads and writes only its own elements after the
// reduction, so out may alias x. add_rms_norm (kAdd): each thread first adds the residual into its
// elements of x (add_kernel's f32 add) and stores them, then the same norm: bit for bit the two
// ops; out may alias x or the residual (a thread reads its residual elements before it writes
// them).
#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/rope_norm.cuh"

namespace ringlm::cuda {

namespace {

template <typename W, bool kAdd>
__global__ void rms_norm_kernel(float* x, int64_t ldx, const float* residual, int64_t ld_res,
                                const W* weight, int64_t H, float eps, bool unit_offset, float* out,
                                int64_t ld_out) {
  __shared__ float smem[33];
  device::wait_prior_grid();
  device::launch_dependents();
  float* row = x + blockIdx.x * ldx;
  float sumsq = 0.0f;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
    if constexpr (kAdd) row[h] += residual[blockIdx.x * ld_res + h];
    sumsq = __fmaf_rn(row[h], row[h], sumsq);
  }
  sumsq = device::block_sum(sumsq, smem);
  const float r = device::rms_scale(sumsq, static_cast<float>(H), eps);
  float* dst = out + blockIdx.x * ld_out;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x)
    dst[h] = device::rms_apply(row[h], r, device::to_f32(weight[h]), unit_offset);
}

// Rows whose length is a multiple of 4 and at most 4 · kVecThreads · kMaxVecs: each thread loads
// its float4s once into registers (all loads in flight together), one block reduction, then
// writes from registers. A single row (decode at batch 1) is then one short burst, not a loop
// of dependent loads.
constexpr int kVecThreads = 512;  // rows up to 16384 (4 · 512 · 8); the weights stay in registers
constexpr int kMaxVecs = 8;
template <typename W, bool kAdd>
__global__ void __launch_bounds__(kVecThreads)
    rms_norm_vec_kernel(float* x, int64_t ldx, const float* residual, int64_t ld_res,
                        const W* weight, int H, float eps, bool unit_offset, float* out,
                        int64_t ld_out) {
  __shared__ float smem[33];
  const int n4 = H / 4;
  // The norm weights are no earlier kernel's output: their loads go out before the wait.
  float w[kMaxVecs][4];
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
#pragma unroll
    for (int e = 0; e < 4; ++e) w[i][e] = idx < n4 ? device::to_f32(weight[4 * idx + e]) : 0.0f;
  }
  device::wait_prior_grid();
  device::launch_dependents();
  auto* row = reinterpret_cast<float4*>(x + blockIdx.x * ldx);
  float4 v[kMaxVecs];
  float sumsq = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    v[i] = idx < n4 ? row[idx] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  if constexpr (kAdd) {
    const auto* res = reinterpret_cast<const float4*>(residual + blockIdx.x * ld_res);
#pragma unroll
    for (int i = 0; i < kMaxVecs; ++i) {
      const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
      if (idx < n4) {
        const float4 r = res[idx];
        v[i] = make_float4(v[i].x + r.x, v[i].y + r.y, v[i].z + r.z, v[i].w + r.w);
        row[idx] = v[i];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) sumsq += device::square_sum(v[i]);
  sumsq = device::block_sum(sumsq, smem);
  const float r = device::rms_scale(sumsq, static_cast<float>(H), eps);
  auto* dst = reinterpret_cast<float4*>(out + blockIdx.x * ld_out);
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    if (idx >= n4) break;
    dst[idx] = make_float4(device::rms_apply(v[i].x, r, w[i][0], unit_offset),
                           device::rms_apply(v[i].y, r, w[i][1], unit_offset),
                           device::rms_apply(v[i].z, r, w[i][2], unit_offset),
                           device::rms_apply(v[i].w, r, w[i][3], unit_offset));
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

namespace {

bool vec_aligned(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.strides[0] % 4 == 0;
}

// rms_norm (residual null) or add_rms_norm.
template <bool kAdd>
void norm_rows(const Tensor& x, const Tensor* residual, const Tensor& weight,
               const ops::RmsNormConfig& config, Tensor& out) {
  const int64_t M = x.shape[0], H = x.shape[1];
  if (M == 0) return;
  RINGLM_CHECK(M <= INT32_MAX, "rms_norm: too many rows: ", M);
  Context& ctx = Context::get();
  const float* res = kAdd ? residual->ptr<const float>() : nullptr;
  const int64_t ld_res = kAdd ? residual->strides[0] : 0;
  const bool aligned = vec_aligned(x) && vec_aligned(out) && (!kAdd || vec_aligned(*residual));
  if (aligned && H % 4 == 0 && H <= 4 * kVecThreads * kMaxVecs) {
    // Up to kMaxVecs float4 per thread, at least a warp, at most kVecThreads.
    const int64_t vec_threads = (H / 4 + kMaxVecs - 1) / kMaxVecs;
    const auto threads =
        static_cast<unsigned>(std::clamp<int64_t>((vec_threads + 31) / 32 * 32, 32, kVecThreads));
    device::dispatch_float(weight.dtype, [&]<typename W>(W*) {
      launch_pdl(rms_norm_vec_kernel<W, kAdd>, dim3(static_cast<unsigned>(M)), dim3(threads), 0,
                 ctx.stream(), x.ptr<float>(), x.strides[0], res, ld_res, weight.ptr<const W>(),
                 static_cast<int>(H), config.eps, config.unit_offset, out.ptr<float>(),
                 out.strides[0]);
    });
    check_launch("rms_norm_vec_kernel");
    return;
  }
  device::dispatch_float(weight.dtype, [&]<typename W>(W*) {
    launch_pdl(rms_norm_kernel<W, kAdd>, dim3(static_cast<unsigned>(M)),
               dim3(device::row_threads(H)), 0, ctx.stream(), x.ptr<float>(), x.strides[0], res,
               ld_res, weight.ptr<const W>(), H, config.eps, config.unit_offset, out.ptr<float>(),
               out.strides[0]);
  });
  check_launch("rms_norm_kernel");
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, const ops::RmsNormConfig& config,
              Tensor& out) {
  norm_rows<false>(x, nullptr, weight, config, out);
}

void add_rms_norm(Tensor& x, const Tensor& residual, const Tensor& weight,
                  const ops::RmsNormConfig& config, Tensor& out) {
  norm_rows<true>(x, &residual, weight, config, out);
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
