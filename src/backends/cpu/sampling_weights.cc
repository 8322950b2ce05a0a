// The sampler's softmax weights on the CPU (engine/sampler.cc): w[i] = exp(x[i] / t − top) in
// f64, 0 where that is not finite (a −inf or NaN logit). Highway's vector exp (≤ 1 ulp) on every
// element, the tail through the same vector code (padded with −inf), so an element's weight does
// not depend on where it sits in the row.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/sampling_weights.cc"
#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include <hwy/contrib/math/math-inl.h>

#include <cmath>
#include <cstddef>
#include <limits>

#include "backends/cpu/cpu_ops.h"

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void SamplingWeightsImpl(const float* x, size_t n, double t, double top, double* w) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t lanes = hn::Lanes(dd);
  const auto vt = hn::Set(dd, t), vtop = hn::Set(dd, top);
  const auto weights = [&](const float* src, double* dst) {
    const auto arg = hn::Sub(hn::Div(hn::PromoteTo(dd, hn::LoadU(df, src)), vt), vtop);
    const auto finite = hn::IsFinite(arg);
    const auto e = hn::Exp(dd, hn::IfThenElseZero(finite, arg));
    hn::StoreU(hn::IfThenElseZero(finite, e), dd, dst);
  };
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) weights(x + i, w + i);
  if (i == n) return;
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(double);
  float x_tail[kMaxLanes];
  double w_tail[kMaxLanes];
  for (size_t j = 0; j < lanes; ++j)
    x_tail[j] = i + j < n ? x[i + j] : -std::numeric_limits<float>::infinity();
  weights(x_tail, w_tail);
  for (size_t j = 0; i + j < n; ++j) w[i + j] = w_tail[j];
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm::cpu {

HWY_EXPORT(SamplingWeightsImpl);

void sampling_weights(std::span<const float> x, double t, double top, std::span<double> w) {
  HWY_DYNAMIC_DISPATCH(SamplingWeightsImpl)(x.data(), x.size(), t, top, w.data());
}

}  // namespace ringlm::cpu
#endif  // HWY_ONCE
