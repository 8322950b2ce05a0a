// CPU RMSNorm and residual add, and the two fused (add_rms_norm: each row added, then normalized
// while in cache — the same operations, so the same bits).
//
// RMSNorm follows transformers' order in f32: var = mean(x²); x̂ = x · (1 / sqrt(var + eps));
// y = x̂ · w (or x̂ · (1 + w) for Gemma). The sum of squares runs in one vector accumulator per
// row (fixed lane order, zero-padded tail), so a row's result does not depend on the batch.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/norm.cc"
#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include "backends/cpu/simd-inl.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/scalar.h"
#include "core/thread_pool.h"

#ifndef RINGLM_BACKENDS_CPU_NORM_SHARED_
#define RINGLM_BACKENDS_CPU_NORM_SHARED_
namespace ringlm::cpu {
struct RmsNormRows {
  float* x;  // written only with a residual
  size_t x_stride;
  const float* residual;  // null: plain rms_norm; else x += residual first, row by row
  size_t residual_stride;
  const float* w;  // [H] f32 (1 + w already applied for unit_offset)
  float* out;
  size_t out_stride;
  size_t H;
  float eps;
};
}  // namespace ringlm::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

void RmsNormRowsImpl(const RmsNormRows& a, size_t m0, size_t m1) {
  const DF df;
  const size_t L = hn::Lanes(df);
  for (size_t m = m0; m < m1; ++m) {
    float* x = a.x + m * a.x_stride;  // out may alias x (or the residual)
    float* out = a.out + m * a.out_stride;
    if (a.residual != nullptr) {
      // add_inplace's operation on this row, while it is in cache.
      Map2F32(df, x, a.residual + m * a.residual_stride, x, a.H, 0.0f,
              [](auto u, auto v) { return hn::Add(u, v); });
    }
    auto acc = hn::Zero(df);
    size_t i = 0;
    for (; i + L <= a.H; i += L) {
      const auto v = hn::LoadU(df, x + i);
      acc = hn::MulAdd(v, v, acc);
    }
    if (i < a.H) {
      HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)] = {};
      for (size_t j = i; j < a.H; ++j) buf[j - i] = x[j];
      const auto v = hn::Load(df, buf);
      acc = hn::MulAdd(v, v, acc);
    }
    const float var = ReduceSumF32(df, acc) / static_cast<float>(a.H);
    const float r = 1.0f / std::sqrt(var + a.eps);
    const auto vr = hn::Set(df, r);
    Map2F32(df, x, a.w, out, a.H, 0.0f,
            [&](auto xv, auto wv) { return hn::Mul(hn::Mul(xv, vr), wv); });
  }
}

void AddRowsImpl(float* x, size_t x_stride, const float* y, size_t y_stride, size_t H, size_t m0,
                 size_t m1) {
  const DF df;
  for (size_t m = m0; m < m1; ++m) {
    float* xr = x + m * x_stride;
    Map2F32(df, xr, y + m * y_stride, xr, H, 0.0f, [](auto a, auto b) { return hn::Add(a, b); });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm::cpu {

HWY_EXPORT(RmsNormRowsImpl);
HWY_EXPORT(AddRowsImpl);

namespace {
// Rows per task so that a task touches at least ~64 KiB (smaller splits cost more than they gain).
int64_t row_grain(size_t row_len) {
  return std::max<int64_t>(1,
                           static_cast<int64_t>((size_t{16} << 10) / std::max<size_t>(row_len, 1)));
}

// x (+= residual when given) normalized into out, rows split over the thread pool.
void norm_rows(float* x, size_t x_stride, const float* residual, size_t residual_stride,
               const Tensor& weight, const ops::RmsNormConfig& config, Tensor& out, size_t M,
               size_t H) {
  std::vector<float> w(H);
  widen_to_f32(weight.dtype, weight.data, H, w.data());
  if (config.unit_offset)
    for (float& v : w) v = 1.0f + v;
  const RmsNormRows a{x,
                      x_stride,
                      residual,
                      residual_stride,
                      w.data(),
                      out.ptr<float>(),
                      static_cast<size_t>(out.strides[0]),
                      H,
                      config.eps};
  ThreadPool::global().parallel_for(
      static_cast<int64_t>(M), row_grain(H), [&](int64_t b, int64_t e) {
        HWY_DYNAMIC_DISPATCH(RmsNormRowsImpl)(a, static_cast<size_t>(b), static_cast<size_t>(e));
      });
}
}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, const ops::RmsNormConfig& config,
              Tensor& out) {
  // Without a residual the kernel never writes x.
  norm_rows(x.ptr<float>(), static_cast<size_t>(x.strides[0]), nullptr, 0, weight, config, out,
            static_cast<size_t>(x.shape[0]), static_cast<size_t>(x.shape[1]));
}

void add_rms_norm(Tensor& x, const Tensor& residual, const Tensor& weight,
                  const ops::RmsNormConfig& config, Tensor& out) {
  norm_rows(x.ptr<float>(), static_cast<size_t>(x.strides[0]), residual.ptr<float>(),
            static_cast<size_t>(residual.strides[0]), weight, config, out,
            static_cast<size_t>(x.shape[0]), static_cast<size_t>(x.shape[1]));
}

void add_inplace(Tensor& x, const Tensor& y) {
  const auto M = static_cast<size_t>(x.shape[0]);
  const auto H = static_cast<size_t>(x.shape[1]);
  ThreadPool::global().parallel_for(
      static_cast<int64_t>(M), row_grain(H), [&](int64_t b, int64_t e) {
        HWY_DYNAMIC_DISPATCH(AddRowsImpl)
        (x.ptr<float>(), static_cast<size_t>(x.strides[0]), y.ptr<float>(),
         static_cast<size_t>(y.strides[0]), H, static_cast<size_t>(b), static_cast<size_t>(e));
      });
}

}  // namespace ringlm::cpu
#endif  // HWY_ONCE
