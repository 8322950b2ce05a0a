// CPU gated activations: out = act(gate) · up.
//
// SiLU as torch: g / (1 + exp(-g)). GELU-tanh as torch (approximate="tanh"):
// 0.5 · g · (1 + tanh(√(2/π) · (g + 0.044715 · g³))). exp and tanh are Highway's vector versions
// (≤ 1 and ≤ 4 ulp), applied to every element through the same vector code.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/activation.cc"
#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include <hwy/contrib/math/math-inl.h>

#include "backends/cpu/simd-inl.h"

#include <algorithm>
#include <cstddef>

#include "backends/cpu/cpu_ops.h"
#include "core/thread_pool.h"

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// exp(-g) with -g clamped to Highway's valid range (exp(100) is +inf in f32 anyway).
template <class V>
HWY_INLINE V Silu(DF df, V g) {
  const V e = hn::Exp(df, hn::Min(hn::Neg(g), hn::Set(df, 100.0f)));
  return hn::Div(g, hn::Add(hn::Set(df, 1.0f), e));
}

template <class V>
HWY_INLINE V GeluTanh(DF df, V g) {
  const V beta = hn::Set(df, 0.7978845608028654f);  // sqrt(2 / pi)
  const V kappa = hn::Set(df, 0.044715f);
  const V cube = hn::Mul(hn::Mul(g, g), g);
  const V inner = hn::Mul(beta, hn::Add(g, hn::Mul(kappa, cube)));
  const V half_g = hn::Mul(hn::Set(df, 0.5f), g);
  return hn::Mul(half_g, hn::Add(hn::Set(df, 1.0f), hn::Tanh(df, inner)));
}

void GatedRowsImpl(const float* gate, size_t g_stride, const float* up, size_t u_stride, float* out,
                   size_t o_stride, size_t I, int activation, size_t m0, size_t m1) {
  const DF df;
  for (size_t m = m0; m < m1; ++m) {
    const float* g = gate + m * g_stride;
    const float* u = up + m * u_stride;
    float* o = out + m * o_stride;  // may alias g
    if (activation == static_cast<int>(ops::Activation::SiLU)) {
      Map2F32(df, g, u, o, I, 0.0f, [&](auto gv, auto uv) { return hn::Mul(Silu(df, gv), uv); });
    } else {
      Map2F32(df, g, u, o, I, 0.0f,
              [&](auto gv, auto uv) { return hn::Mul(GeluTanh(df, gv), uv); });
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm::cpu {

HWY_EXPORT(GatedRowsImpl);

void gated_activation(const Tensor& gate, const Tensor& up, ops::Activation activation,
                      Tensor& out) {
  const auto M = static_cast<size_t>(gate.shape[0]);
  const auto I = static_cast<size_t>(gate.shape[1]);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(4096 / std::max<size_t>(I, 1)));
  ThreadPool::global().parallel_for(static_cast<int64_t>(M), grain, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(GatedRowsImpl)
    (gate.ptr<float>(), static_cast<size_t>(gate.strides[0]), up.ptr<float>(),
     static_cast<size_t>(up.strides[0]), out.ptr<float>(), static_cast<size_t>(out.strides[0]), I,
     static_cast<int>(activation), static_cast<size_t>(b), static_cast<size_t>(e));
  });
}

}  // namespace ringlm::cpu
#endif  // HWY_ONCE
