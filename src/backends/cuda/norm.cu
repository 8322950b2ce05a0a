// rms_norm, add_inplace and the two fused (add_rms_norm) on the GPU.
//
// rms_norm: one block per row; the f32 sum of squares is reduced in a fixed order for the row
// length (batch invariant), then r = 1 / sqrt(mean + eps) with IEEE sqrt and division, and
// out = x · r · w (Gemma: · (1 + w)). Each thread reads and writes only its own elements after the
// reduction, so out may alias x. add_rms_norm (kAdd): each thread first adds the residual into its
// elements of x (add_kernel's f32 add) and stores them, then the same norm: bit for bit the two
// ops; out may alias x or the residual (a thread reads its residual elements before it writes
// them). out may also be BF16/F16: the same f32 value rounded once (for a matmul whose cuBLAS path
// would round it anyway).
#include <cstdint>
#include <type_traits>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/rope_norm.cuh"

namespace ringlm::cuda {

namespace {

template <typename W, typename O, bool kAdd>
__global__ void rms_norm_kernel(float* x, int64_t ldx, const float* residual, int64_t ld_res,
                                const W* weight, int64_t H, float eps, bool unit_offset, O* out,
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
  O* dst = out + blockIdx.x * ld_out;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x)
    dst[h] =
        device::from_f32<O>(device::rms_apply(row[h], r, device::to_f32(weight[h]), unit_offset));
}

// Four consecutive outputs: one 16-byte store for f32, one 8-byte store for 16-bit types.
template <typename O>
__device__ __forceinline__ void store4(O* dst, float a, float b, float c, float d) {
  if constexpr (std::is_same_v<O, float>) {
    *reinterpret_cast<float4*>(dst) = make_float4(a, b, c, d);
  } else {
    const O v[4] = {device::from_f32<O>(a), device::from_f32<O>(b), device::from_f32<O>(c),
                    device::from_f32<O>(d)};
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(v);
  }
}

// Rows whose length is a multiple of 4 and at most 4 · kVecThreads · kMaxVecs: each thread loads
// its float4s once into registers (all loads in flight together), one block reduction, then
// writes from registers. A single row (decode at batch 1) is then one short burst, not a loop
// of dependent loads. The layout and the order of the sum of squares are device/rope_norm.cuh's
// (norm_vec_partial), which the GEMV with a fused norm (gemv.cu) reproduces bit for bit.
constexpr int kVecThreads = device::kNormVecThreads;  // the weights stay in registers
constexpr int kMaxVecs = device::kNormMaxVecs;
template <typename W, typename O, bool kAdd>
__global__ void __launch_bounds__(kVecThreads)
    rms_norm_vec_kernel(float* x, int64_t ldx, const float* residual, int64_t ld_res,
                        const W* weight, int H, float eps, bool unit_offset, O* out,
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
  O* dst = out + blockIdx.x * ld_out;
#pragma unroll
  for (int i = 0; i < kMaxVecs; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    if (idx >= n4) break;
    store4(dst + 4 * idx, device::rms_apply(v[i].x, r, w[i][0], unit_offset),
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

// Rows of 4-element groups at their natural alignment (16 bytes for f32, 8 for 16-bit).
bool vec_aligned(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data) % (4 * dtype_size(t.dtype)) == 0 &&
         t.strides[0] % 4 == 0;
}

// f(O*) with O the output's element type: F32, BF16 or F16.
template <typename F>
void dispatch_out(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32:
      return f(static_cast<float*>(nullptr));
    case DType::BF16:
      return f(static_cast<__nv_bfloat16*>(nullptr));
    case DType::F16:
      return f(static_cast<__half*>(nullptr));
    default:
      RINGLM_FAIL("rms_norm: output dtype ", dtype_name(dtype));
  }
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
    const auto threads = static_cast<unsigned>(device::norm_vec_threads(H));
    device::dispatch_float(weight.dtype, [&]<typename W>(W*) {
      dispatch_out(out.dtype, [&]<typename O>(O*) {
        launch_pdl(rms_norm_vec_kernel<W, O, kAdd>, dim3(static_cast<unsigned>(M)), dim3(threads),
                   0, ctx.stream(), x.ptr<float>(), x.strides[0], res, ld_res,
                   weight.ptr<const W>(), static_cast<int>(H), config.eps, config.unit_offset,
                   static_cast<O*>(out.data), out.strides[0]);
      });
    });
    check_launch("rms_norm_vec_kernel");
    return;
  }
  device::dispatch_float(weight.dtype, [&]<typename W>(W*) {
    dispatch_out(out.dtype, [&]<typename O>(O*) {
      launch_pdl(rms_norm_kernel<W, O, kAdd>, dim3(static_cast<unsigned>(M)),
                 dim3(device::row_threads(H)), 0, ctx.stream(), x.ptr<float>(), x.strides[0], res,
                 ld_res, weight.ptr<const W>(), H, config.eps, config.unit_offset,
                 static_cast<O*>(out.data), out.strides[0]);
    });
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
