// The GPU quantized-matmul checks shared by quantized_test.cc and quant_mma_test.cc: a fixture's
// tensors on the device, the error bound of each GPU path against the CPU kernel, and the
// element-by-element comparison (which reports the path that ran).
#pragma once

#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/quant_mma.h"
#include "cuda_test_util.h"
#include "kv/affine_codec.h"
#include "ops/quant_fixture.h"
#include "ops/weight.h"

namespace ringlm::ops::testing {

constexpr int64_t kGemvRows = 8;  // quant_matmul.cu's kQuantGemvMaxRows

// A fixture's tensors on the device.
struct DeviceQuant {
  OnDevice codes, scales, biases;
  QuantizedMatrix q;
  explicit DeviceQuant(const QuantFixture& f) : codes(f.codes), scales(f.scales), biases(f.biases) {
    q = {codes.t(), scales.t(), biases.t(), f.q.bits, f.q.group_size};
  }
};

// Unit roundoff of the scales' dtype (the tile path rounds x and dequant(w) to it).
inline double dtype_roundoff(DType d) {
  return d == DType::BF16 ? 1.0 / 256 : d == DType::F16 ? 1.0 / 2048 : 0.0;
}

// Turns the tensor-core kernel off for a scope (tests of the other paths at shapes it would take).
struct QuantMmaOff : SwitchFor {
  QuantMmaOff() : SwitchFor(cuda::quant_mma_enabled, cuda::set_quant_mma, false) {}
};

enum class QuantPath { Gemv, Tiles, Mma };

// |y_gpu - y_cpu| bound for element (m, n). The CPU is exact on w_cpu = fl(fl(s·q) + b) up to
// f32 accumulation (γ_(K+2) of Σ|x·w_cpu| + |bias|).
//  GEMV (M <= 8): the GPU sums s·Σx·q + b·Σx in f32: within (K + 64)·u of
//    S = Σ|x|·(|s·q| + |b|) + |bias|; w_cpu is within 2u·(|s·q| + |b|) of s·q + b. So
//    (3K + 100)·u·S covers both with room.
//  Tiles (M > 8): x and w_cpu rounded to the scales' dtype (u_d each) and an f32 accumulation:
//    2·u_d·Σ|x·w_cpu| + 3(K + 2)·u·(Σ|x·w_cpu| + |bias|), plus f16 subnormals (absolute 2^-25
//    per rounded x or w, times |w| ≤ 26 or |x| ≤ 1).
//  Mma (quant_mma.h, bf16 scales): x rounded to bf16 and w = bf16(s·q + b) from the exact (4-bit)
//    or f32-rounded (8-bit) s·q + b, which is within u_d·|w_cpu| + 2.1u·(|s·q| + |b|) of w_cpu:
//    the tile bound with the f32 accumulation doubled (tensor cores may truncate) plus 4u·S.
inline double tolerance(const QuantFixture& f, const Owned& x, const Owned& bias, QuantPath path,
                        int64_t m, int64_t n) {
  const QuantizedMatrix& q = f.q;
  const int64_t K = q.cols(), groups = K / q.group_size;
  double spread = bias.t().empty() ? 0.0 : std::fabs(bias.f(n)), dense = spread;
  for (int64_t k = 0; k < K; ++k) {
    const double xk = std::fabs(x.f(m * K + k));
    const double s = f.scales.f(n * groups + k / q.group_size);
    const double b = f.biases.f(n * groups + k / q.group_size);
    const double code =
        kv::affine_code(q.codes.ptr<const uint32_t>() + n * q.codes.shape[1], k, q.bits);
    spread += xk * (std::fabs(s * code) + std::fabs(b));
    dense += xk * std::fabs(reference::dequantized_at(q, n, k));
  }
  const auto Kd = static_cast<double>(K);
  if (path == QuantPath::Gemv) return (3.0 * Kd + 100.0) * kEps * 1.01 * spread + 1e-30;
  const double ud = dtype_roundoff(q.scales.dtype);
  if (path == QuantPath::Mma)
    return (2.0 * ud + 6.0 * (Kd + 2.0) * kEps) * 1.01 * dense + 4.0 * kEps * spread + 1e-30;
  const double sub = q.scales.dtype == DType::F16 ? Kd * 27.0 * std::ldexp(1.0, -25) : 0.0;
  return (2.0 * ud + 3.0 * (Kd + 2.0) * kEps) * 1.01 * dense + sub + 1e-30;
}

// y = x · dequant(w)ᵀ + bias on the GPU against the CPU kernel, element by element; `path` gets
// the GPU path that ran.
inline void expect_matches_cpu(const QuantFixture& f, int64_t M, bool with_bias, uint32_t seed,
                               QuantPath* path = nullptr) {
  const int64_t K = f.q.cols(), N = f.q.rows();
  Owned x(DType::F32, {M, K}), b(DType::BF16, {N}), ref(DType::F32, {M, N});
  fill_uniform(x, seed);
  fill_uniform(b, seed + 1);
  const Owned no_bias;
  const Owned& bias = with_bias ? b : no_bias;
  matmul(x.t(), Weight::quantized(f.q), bias.t(), ref.t());
  DeviceQuant dw(f);
  OnDevice dx(x), db(b), dy(DType::F32, {M, N});
  const int64_t before = cuda::quant_mma_count();
  matmul(dx.t(), Weight::quantized(dw.q), with_bias ? db.t() : Tensor(), dy.t());
  const QuantPath ran = cuda::quant_mma_count() != before ? QuantPath::Mma
                        : M <= kGemvRows                  ? QuantPath::Gemv
                                                          : QuantPath::Tiles;
  if (path != nullptr) *path = ran;
  const Owned y = dy.to_host();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      ASSERT_NEAR(y.f(m * N + n), ref.f(m * N + n), tolerance(f, x, bias, ran, m, n))
          << "m=" << m << " n=" << n;
}

}  // namespace ringlm::ops::testing
