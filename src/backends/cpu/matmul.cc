// CPU matmul: y[M, N] = x[M, K] · w[N, K]ᵀ + bias, f32 activations, f32/bf16/f16 weights.
//
// Batch invariance: y[m, n] is always computed the same way: one vector accumulator over K in
// steps of the target's lane count (a zero-padded step for the K tail), one horizontal sum in the
// target's fixed order, then + bias. Register tiles (MR rows of x × NR rows of w) only decide how
// many such accumulators run side by side, never what goes into one; so the result for a row does
// not depend on M, on the tile shape or on the thread split.
//
// M = 1 (decode) is a GEMV that streams the weights once: threads own contiguous column ranges and
// each tile runs NR independent FMA chains. M > 1 (prefill) reuses each loaded weight vector
// against MR rows of x, and walks the weights in cache-sized column blocks so they are read from
// memory once per call rather than once per row.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/matmul.cc"
#include "backends/cpu/hwy_config.h"  // first: selects the targets

#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>

#include <hwy/cache_control.h>

#include "backends/cpu/simd-inl.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/matmul_split.h"
#include "backends/cpu/scalar.h"
#include "core/thread_pool.h"

#ifndef RINGLM_BACKENDS_CPU_MATMUL_SHARED_
#define RINGLM_BACKENDS_CPU_MATMUL_SHARED_
namespace ringlm::cpu {
// One thread's share of a matmul: rows [m0, m1) × columns [n0, n1).
struct MatmulTask {
  const float* x;
  size_t x_stride;  // elements between rows of x
  const void* w;    // [N, K] in `wtype`
  DType wtype;
  const float* bias;  // [N] f32 or nullptr
  float* y;
  size_t y_stride;
  size_t K;
  size_t m0, m1, n0, n1;
};
}  // namespace ringlm::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace ringlm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// Tile widths: MR rows of x share each weight vector, NR weight rows share each x vector. They
// only change speed (register use), never results. AVX-512 has 32 vector registers, others 16.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr size_t kWideNR = 4;
#else
constexpr size_t kWideNR = 2;
#endif
// GEMV (MR = 1) streams 8 weight rows at once: more memory streams in flight measured ~15% faster
// than 4 on AVX2 and AVX-512 (each converted weight vector is used once, so registers suffice).
constexpr size_t NrFor(size_t mr) {
  return mr == 1 ? 8 : mr == 2 ? 4 : kWideNR;
}

constexpr size_t kPrefetch = 512;  // elements ahead in each weight row (1 KiB of bf16)

// y[m0 + i, n + j] for i < MR, j < NR.
template <size_t MR, size_t NR, typename W>
HWY_INLINE void Tile(const MatmulTask& t, size_t m0, size_t n) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t K = t.K;
  const W* HWY_RESTRICT w = static_cast<const W*>(t.w) + n * K;
  const float* HWY_RESTRICT x = t.x + m0 * t.x_stride;

  // The constant-trip loops are unrolled so that acc and wv live in registers.
  hn::Vec<DF> acc[MR][NR];
  RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
    RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) acc[i][j] = hn::Zero(df);
  }

  size_t k = 0;
  for (; k + L <= K; k += L) {
    hn::Vec<DF> wv[NR];
    if constexpr (MR == 1) {  // GEMV: nothing is reused, so ask for the rows early
      RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) hwy::Prefetch(w + j * K + k + kPrefetch);
    }
    RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) wv[j] = LoadF32(df, w + j * K + k);
    RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
      const auto xv = hn::LoadU(df, x + i * t.x_stride + k);
      RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) acc[i][j] = hn::MulAdd(xv, wv[j], acc[i][j]);
    }
  }
  if (k < K) {  // K tail: one more step on zero-padded copies (0 · 0 adds exactly nothing)
    constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
    HWY_ALIGN float xt[MR][kMax] = {};
    HWY_ALIGN float wt[NR][kMax] = {};
    for (size_t i = 0; i < MR; ++i)
      for (size_t kk = k; kk < K; ++kk) xt[i][kk - k] = x[i * t.x_stride + kk];
    for (size_t j = 0; j < NR; ++j)
      for (size_t kk = k; kk < K; ++kk) wt[j][kk - k] = to_f32(w[j * K + kk]);
    RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
      const auto xv = hn::Load(df, xt[i]);
      RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) {
        acc[i][j] = hn::MulAdd(xv, hn::Load(df, wt[j]), acc[i][j]);
      }
    }
  }
  RINGLM_UNROLL for (size_t i = 0; i < MR; ++i) {
    float* HWY_RESTRICT y = t.y + (m0 + i) * t.y_stride + n;
    RINGLM_UNROLL for (size_t j = 0; j < NR; ++j) {
      const float sum = ReduceSumF32(df, acc[i][j]);
      y[j] = t.bias != nullptr ? sum + t.bias[n + j] : sum;
    }
  }
}

// Rows [m, m + MR) × columns [n0, n1): wide tiles, then single columns.
template <size_t MR, typename W>
HWY_INLINE void RowBlock(const MatmulTask& t, size_t m, size_t n0, size_t n1) {
  constexpr size_t NR = NrFor(MR);
  size_t n = n0;
  for (; n + NR <= n1; n += NR) Tile<MR, NR, W>(t, m, n);
  for (; n < n1; ++n) Tile<MR, 1, W>(t, m, n);
}

template <typename W>
void RunTask(const MatmulTask& t) {
  // Column blocks of about 128 KiB of weights stay in L2 while every row block passes over them
  // (a multiple of 8 columns, so whole tiles fit). A single row block needs no blocking.
  const size_t row_bytes = std::max<size_t>(t.K * sizeof(W), 1);
  const size_t block =
      t.m1 - t.m0 <= 4 ? t.n1 - t.n0 : std::max<size_t>(1, (size_t{128} << 10) / row_bytes / 8) * 8;
  for (size_t nb = t.n0; nb < t.n1; nb += block) {
    const size_t ne = std::min(t.n1, nb + block);
    size_t m = t.m0;
    for (; m + 4 <= t.m1; m += 4) RowBlock<4, W>(t, m, nb, ne);
    switch (t.m1 - m) {
      case 3:
        RowBlock<3, W>(t, m, nb, ne);
        break;
      case 2:
        RowBlock<2, W>(t, m, nb, ne);
        break;
      case 1:
        RowBlock<1, W>(t, m, nb, ne);
        break;
      default:
        break;
    }
  }
}

void MatmulTaskImpl(const MatmulTask& t) {
  switch (t.wtype) {
    case DType::F32:
      return RunTask<float>(t);
    case DType::BF16:
      return RunTask<hwy::bfloat16_t>(t);
    case DType::F16:
      return RunTask<hwy::float16_t>(t);
    default:
      break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ringlm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ringlm::cpu {

HWY_EXPORT(MatmulTaskImpl);

void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const auto M = static_cast<size_t>(x.shape[0]);
  const auto K = static_cast<size_t>(x.shape[1]);
  const auto N = static_cast<size_t>(w.shape[0]);
  if (M == 0 || N == 0) return;

  const std::vector<float> bias_f32 = bias_in_f32(bias, N);
  MatmulTask base{x.ptr<float>(),
                  static_cast<size_t>(x.strides[0]),
                  w.data,
                  w.dtype,
                  bias_f32.empty() ? nullptr : bias_f32.data(),
                  y.ptr<float>(),
                  static_cast<size_t>(y.strides[0]),
                  K,
                  0,
                  M,
                  0,
                  N};
  run_split(base, M, N, [](const MatmulTask& t) { HWY_DYNAMIC_DISPATCH(MatmulTaskImpl)(t); });
}

}  // namespace ringlm::cpu
#endif  // HWY_ONCE
