// Checks that several GPU op tests make alike: the error bound of an f32-accumulated x·wᵀ + b,
// exactness on small integers, x and y as row views inside wider buffers, and a bad token id
// reported by cuda::synchronize().
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "cuda_test_util.h"
#include "ops/reference.h"

namespace ringlm::ops::testing {

// Σ|x·w| + |b| for element (m, n) of y = x·wᵀ + b; bias is null for none.
inline double matmul_magnitude(const Owned& x,     // F32[M, K]
                               const Owned& w,     // [N, K]
                               const Owned* bias,  // [N]
                               int64_t m, int64_t n) {
  const int64_t K = x.t().shape[1];
  double mag = bias == nullptr ? 0.0 : std::fabs(bias->f(n));
  for (int64_t k = 0; k < K; ++k) mag += std::fabs(double{x.f(m * K + k)} * w.f(n * K + k));
  return mag;
}

// |y - reference| for one element of y = x·wᵀ + b with weights of dtype wt: each product x·w
// carries x's rounding to the weights' dtype (relative ≤ u_x; exact for f32) and the f32
// accumulation in any order adds ≤ γ_(K+2) relative to mag = Σ|x·w| + |b| (Higham); doubled for
// accumulators that may truncate rather than round. F16 inputs below 2^-14 are subnormal:
// absolute ≤ 2^-25 each, times |w| ≤ 1.
inline double matmul_tolerance(DType wt, int64_t K, double mag) {
  const double ux = wt == DType::BF16 ? 1.0 / 256 : wt == DType::F16 ? 1.0 / 2048 : 0.0;
  const double sub = wt == DType::F16 ? static_cast<double>(K) * std::ldexp(1.0, -25) : 0.0;
  return (ux + 2.0 * static_cast<double>(K + 2) * kEps) * 1.01 * mag + sub + 1e-30;
}

// y (F32[M, N], the GPU's) against the scalar reference of x·wᵀ (+ bias; null for none), each
// element within matmul_tolerance for w's dtype.
inline ::testing::AssertionResult matches_reference_matmul(const Owned& y, const Owned& x,
                                                           const Owned& w, const Owned* bias) {
  const int64_t M = x.t().shape[0], K = x.t().shape[1], N = w.t().shape[0];
  Owned ref(DType::F32, {M, N});
  reference::matmul(x.t(), w.t(), bias == nullptr ? Tensor() : bias->t(), ref.t());
  // On failure: the first miss, how many, and the rows and columns they span (a new kernel's
  // wrong fragment or tile shows as a pattern there).
  int64_t misses = 0, m_lo = M, m_hi = -1, n_lo = N, n_hi = -1;
  ::testing::Message first;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      const double tol = matmul_tolerance(w.t().dtype, K, matmul_magnitude(x, w, bias, m, n));
      const double got = y.f(m * N + n), want = ref.f(m * N + n);
      if (std::fabs(got - want) <= tol) continue;
      if (misses++ == 0)
        first << "m=" << m << " n=" << n << ": " << got << " vs " << want << " (tolerance " << tol
              << ")";
      m_lo = std::min(m_lo, m), m_hi = std::max(m_hi, m);
      n_lo = std::min(n_lo, n), n_hi = std::max(n_hi, n);
    }
  }
  if (misses == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << first << "; " << misses << " of " << M * N << " miss, rows " << m_lo << ".." << m_hi
         << ", columns " << n_lo << ".." << n_hi;
}

// Small integers: every product and partial sum is an exact f32 integer, so any correct matmul
// (any order, cut of K or tensor-core path) equals the reference bit for bit. Runs
// gpu(x /* F32[M, K] */, w /* wt[N, K] */, bias /* wt[N] */, y /* F32[M, N] */) on device copies.
template <typename GpuMatmul>
::testing::AssertionResult exact_on_small_integers(DType wt, int64_t M, int64_t K, int64_t N,
                                                   const GpuMatmul& gpu) {
  Owned x(DType::F32, {M, K}), w(wt, {N, K}), b(wt, {N}), ref(DType::F32, {M, N});
  fill_small_ints(x, 4);
  fill_small_ints(w, 5);
  fill_small_ints(b, 6, 100);
  OnDevice dx(x), dw(w), db(b), dy(DType::F32, {M, N});
  gpu(dx.t(), dw.t(), db.t(), dy.t());
  reference::matmul(x.t(), w.t(), b.t(), ref.t());
  if (bitwise_equal(dy.to_host().t(), ref.t())) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "not the reference's bits";
}

// The shape and data of a strided-rows check: x rows K + x_pad floats apart, y rows N + 3 apart;
// both buffers hold small integers (seeds x_seed, y_seed).
struct StridedRows {
  int64_t M, K, N, x_pad;
  uint32_t x_seed, y_seed;
};

// Runs y = gpu(x) with x and y as row views inside wider device buffers, and y = cpu(x) on the same
// host views, and checks that the GPU's y is the CPU's bit for bit and that its padding is
// untouched. gpu(const Tensor& x /* F32[M, K] */, Tensor& y /* F32[M, N] */), cpu alike.
template <typename GpuOp, typename CpuOp>
::testing::AssertionResult strided_rows_match(const StridedRows& s, const GpuOp& gpu,
                                              const CpuOp& cpu) {
  const int64_t M = s.M, K = s.K, N = s.N;
  Owned xbuf(DType::F32, {M, K + s.x_pad}), ybuf(DType::F32, {M, N + 3}), ref(DType::F32, {M, N});
  fill_small_ints(xbuf, s.x_seed);
  fill_small_ints(ybuf, s.y_seed, 1000);
  OnDevice dx(xbuf), dy(ybuf);
  Tensor x = xbuf.t(), xv = dx.t(), yv = dy.t();
  x.shape[1] = K;
  xv.shape[1] = K;
  yv.shape[1] = N;
  gpu(xv, yv);
  cpu(x, ref.t());
  const Owned y = dy.to_host();
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N + 3; ++n) {
      const float want = n < N ? ref.f(m * N + n) : ybuf.f(m * (N + 3) + n);
      const float got = y.f(m * (N + 3) + n);
      if (got != want)
        return ::testing::AssertionFailure()
               << "m=" << m << " n=" << n << ": " << got << " != " << want;
    }
  }
  return ::testing::AssertionSuccess();
}

// Token ids {1, 5, 2} for a table of 5 rows: the id at index 1 is outside the vocabulary.
inline Owned ids_with_a_bad_one() {
  Owned ids(DType::I32, {3});
  ids.p<int32_t>()[0] = 1;
  ids.p<int32_t>()[1] = 5;
  ids.p<int32_t>()[2] = 2;
  return ids;
}

// After an embedding of ids_with_a_bad_one() into out (F32[3, H]): a bad id cannot be checked on
// the host (it lives on the device), so the kernel leaves its row NaN and cuda::synchronize()
// throws, naming the id and its index, and clears the record. Returns out on the host for the
// caller to check the good rows.
inline Owned expect_bad_id_reported(const OnDevice& out) {
  try {
    cuda::synchronize();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 5 at index 1"), std::string::npos) << e.what();
  }
  cuda::synchronize();  // the record was cleared
  Owned host = out.to_host();
  const int64_t H = host.t().shape[1];
  for (int64_t h = 0; h < H; ++h) EXPECT_TRUE(std::isnan(host.f(H + h))) << "h=" << h;
  return host;
}

}  // namespace ringlm::ops::testing
