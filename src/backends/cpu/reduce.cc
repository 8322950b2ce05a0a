// CPU row-wise softmax, argmax and elementwise soft-capping.
//
// softmax: y = exp(x - max) / Σ exp(x - max), the sum in one vector accumulator per row (fixed lane
// order, so a row's result does not depend on the batch). A row containing NaN becomes all NaN; a
// row of only -inf becomes all NaN (as torch: 0/0).
// argmax: the lowest index of the maximum; NaN counts as larger than everything (as torch.argmax:
// the first NaN wins). softcap: cap · tanh(x / cap) as transformers (divide, tanh, multiply).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/reduce.cc"
#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include <hwy/contrib/math/math-inl.h>

#include "backends/cpu/simd-inl.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "backends/cpu/cpu_ops.h"
#include "core/thread_pool.h"

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

void SoftmaxRow(float* x, size_t n) {
  const DF df;
  const size_t L = hn::Lanes(df);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // Pass 1: max, and whether any NaN (Max's NaN behaviour is target-specific, so test apart).
  auto vmax = hn::Set(df, -kInf);
  auto nan = hn::FirstN(df, 0);  // all false
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto v = hn::LoadU(df, x + i);
    vmax = hn::Max(vmax, v);
    nan = hn::Or(nan, hn::Ne(v, v));
  }
  float mx = ReduceMaxF32(df, vmax);
  bool has_nan = !hn::AllFalse(df, nan);
  for (; i < n; ++i) {
    mx = std::max(mx, x[i]);
    has_nan = has_nan || std::isnan(x[i]);
  }
  if (has_nan || mx == -kInf) {
    std::fill(x, x + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  // Pass 2: e = exp(x - max) in place, summed. x - max <= 0; clamp -inf to a finite value
  // inside Exp's valid range (exp(-1e4) is 0 in f32). The padded tail adds exactly 0.
  const auto vm = hn::Set(df, mx);
  const auto lo = hn::Set(df, -1e4f);
  auto sum = hn::Zero(df);
  MapF32(df, x, x, n, -kInf, [&](auto v) {
    const auto e = hn::Exp(df, hn::Max(hn::Sub(v, vm), lo));
    sum = hn::Add(sum, e);
    return e;
  });
  const auto vs = hn::Set(df, ReduceSumF32(df, sum));
  MapF32(df, x, x, n, 0.0f, [&](auto v) { return hn::Div(v, vs); });
}

void SoftmaxRowsImpl(float* x, size_t stride, size_t n, size_t m0, size_t m1) {
  for (size_t m = m0; m < m1; ++m) SoftmaxRow(x + m * stride, n);
}

void SoftcapRowsImpl(float* x, size_t stride, size_t n, float cap, size_t m0, size_t m1) {
  const DF df;
  const auto vcap = hn::Set(df, cap);
  for (size_t m = m0; m < m1; ++m) {
    float* row = x + m * stride;
    MapF32(df, row, row, n, 0.0f,
           [&](auto v) { return hn::Mul(vcap, hn::Tanh(df, hn::Div(v, vcap))); });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm::cpu {

HWY_EXPORT(SoftmaxRowsImpl);
HWY_EXPORT(SoftcapRowsImpl);

namespace {
int64_t row_grain(size_t n) {
  return std::max<int64_t>(1, static_cast<int64_t>((size_t{16} << 10) / std::max<size_t>(n, 1)));
}
}  // namespace

void softmax(Tensor& x) {
  const auto M = static_cast<size_t>(x.shape[0]);
  const auto N = static_cast<size_t>(x.shape[1]);
  ThreadPool::global().parallel_for(static_cast<int64_t>(M), row_grain(N),
                                    [&](int64_t b, int64_t e) {
                                      HWY_DYNAMIC_DISPATCH(SoftmaxRowsImpl)
                                      (x.ptr<float>(), static_cast<size_t>(x.strides[0]), N,
                                       static_cast<size_t>(b), static_cast<size_t>(e));
                                    });
}

void softcap(Tensor& x, float cap) {
  const auto M = static_cast<size_t>(x.shape[0]);
  const auto N = static_cast<size_t>(x.shape[1]);
  ThreadPool::global().parallel_for(static_cast<int64_t>(M), row_grain(N),
                                    [&](int64_t b, int64_t e) {
                                      HWY_DYNAMIC_DISPATCH(SoftcapRowsImpl)
                                      (x.ptr<float>(), static_cast<size_t>(x.strides[0]), N, cap,
                                       static_cast<size_t>(b), static_cast<size_t>(e));
                                    });
}

void argmax(const Tensor& x, Tensor& out) {
  const auto M = static_cast<size_t>(x.shape[0]);
  const auto N = static_cast<size_t>(x.shape[1]);
  ThreadPool::global().parallel_for(
      static_cast<int64_t>(M), row_grain(N), [&](int64_t b, int64_t e) {
        for (auto m = static_cast<size_t>(b); m < static_cast<size_t>(e); ++m) {
          const float* row = x.row<float>(static_cast<int64_t>(m));
          size_t best = 0;
          for (size_t i = 0; i < N; ++i) {
            if (std::isnan(row[i])) {
              best = i;
              break;
            }
            if (row[i] > row[best]) best = i;
          }
          out.ptr<int32_t>()[m] = static_cast<int32_t>(best);
        }
      });
}

}  // namespace ringlm::cpu
#endif  // HWY_ONCE
