// GPU matmul vs the scalar reference (ops/reference.h): every weight dtype, odd sizes, bias,
// strided rows, zero sizes, and bit-exact small-integer products.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::kEps;
using testing::OnDevice;
using testing::Owned;

struct Case {
  int64_t M, K, N;
};
// Odd sizes around cuBLAS tiles and vector widths, plus a decode-like and a prefill-like shape.
const std::vector<Case> kCases = {{1, 1, 1},      {2, 3, 5},       {7, 17, 257},
                                  {33, 1023, 5},  {1, 1023, 257},  {33, 17, 257},
                                  {1, 4096, 515}, {129, 512, 384}, {2, 1023, 1}};
const DType kWeightTypes[] = {DType::F32, DType::BF16, DType::F16};

// Unit roundoff of x once rounded to the weights' dtype (bf16: 8 significant bits, f16: 11).
double input_roundoff(DType wt) {
  return wt == DType::BF16 ? 1.0 / 256 : wt == DType::F16 ? 1.0 / 2048 : 0.0;
}

TEST(CudaMatmul, MatchesReferenceOnRandomInputs) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kWeightTypes) {
    for (const Case& c : kCases) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " M=" << c.M
                                          << " K=" << c.K << " N=" << c.N << " bias=" << with_bias);
        Owned x(DType::F32, {c.M, c.K}), w(wt, {c.N, c.K}), b(wt, {c.N});
        Owned ref(DType::F32, {c.M, c.N});
        testing::fill_uniform(x, 1);
        testing::fill_uniform(w, 2);
        testing::fill_uniform(b, 3);
        OnDevice dx(x), dw(w), db(b), dy(DType::F32, {c.M, c.N});
        matmul(dx.t(), dw.t(), with_bias ? db.t() : Tensor(), dy.t());
        reference::matmul(x.t(), w.t(), with_bias ? b.t() : Tensor(), ref.t());
        const Owned y = dy.to_host();
        // Each product x·w carries x's rounding to the weights' dtype (relative ≤ u_x; exact for
        // f32) and the f32 accumulation in any order adds ≤ γ_(K+2) relative to Σ|x·w| + |b|
        // (Higham); doubled for accumulators that may truncate rather than round. F16 inputs
        // below 2^-14 are subnormal: absolute ≤ 2^-25 each, times |w| ≤ 1.
        const double ux = input_roundoff(wt);
        const double sub = wt == DType::F16 ? static_cast<double>(c.K) * std::ldexp(1.0, -25) : 0;
        for (int64_t m = 0; m < c.M; ++m) {
          for (int64_t n = 0; n < c.N; ++n) {
            double mag = with_bias ? std::fabs(b.f(n)) : 0.0;
            for (int64_t k = 0; k < c.K; ++k)
              mag += std::fabs(double{x.f(m * c.K + k)} * w.f(n * c.K + k));
            const double tol =
                (ux + 2.0 * static_cast<double>(c.K + 2) * kEps) * 1.01 * mag + sub + 1e-30;
            ASSERT_NEAR(y.f(m * c.N + n), ref.f(m * c.N + n), tol) << "m=" << m << " n=" << n;
          }
        }
      }
    }
  }
}

// Small integers are exact in every dtype and every partial sum is an exact f32 integer, so any
// correct GEMM (any tile order, split-K or tensor-core path) equals the reference bit for bit.
TEST(CudaMatmul, ExactOnSmallIntegers) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kWeightTypes) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(::testing::Message()
                   << testing::dtype_label(wt) << " M=" << c.M << " K=" << c.K << " N=" << c.N);
      Owned x(DType::F32, {c.M, c.K}), w(wt, {c.N, c.K}), b(wt, {c.N});
      Owned ref(DType::F32, {c.M, c.N});
      testing::fill_small_ints(x, 4);
      testing::fill_small_ints(w, 5);
      testing::fill_small_ints(b, 6, 100);
      OnDevice dx(x), dw(w), db(b), dy(DType::F32, {c.M, c.N});
      matmul(dx.t(), dw.t(), db.t(), dy.t());
      reference::matmul(x.t(), w.t(), b.t(), ref.t());
      ASSERT_TRUE(testing::bitwise_equal(dy.to_host().t(), ref.t()));
    }
  }
}

// x and y as row views inside wider buffers (rows further apart than K / N); the padding of y
// must stay untouched.
TEST(CudaMatmul, StridedRows) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kWeightTypes) {
    const int64_t M = 7, K = 19, N = 9;
    Owned xbuf(DType::F32, {M, K + 5}), w(wt, {N, K}), b(DType::BF16, {N});
    Owned ybuf(DType::F32, {M, N + 3}), ref(DType::F32, {M, N});
    testing::fill_small_ints(xbuf, 7);
    testing::fill_small_ints(w, 8);
    testing::fill_small_ints(b, 9);
    testing::fill_small_ints(ybuf, 10, 1000);
    OnDevice dx(xbuf), dw(w), db(b), dy(ybuf);
    Tensor x = xbuf.t(), xv = dx.t(), yv = dy.t();
    x.shape[1] = K;
    xv.shape[1] = K;
    yv.shape[1] = N;
    matmul(xv, dw.t(), db.t(), yv);
    reference::matmul(x, w.t(), b.t(), ref.t());
    const Owned y = dy.to_host();
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N + 3; ++n) {
        const float want = n < N ? ref.f(m * N + n) : ybuf.f(m * (N + 3) + n);
        ASSERT_EQ(y.f(m * (N + 3) + n), want)
            << testing::dtype_label(wt) << " m=" << m << " n=" << n;
      }
    }
  }
}

TEST(CudaMatmul, ZeroSizes) {
  RINGLM_REQUIRE_GPU();
  Owned b(DType::F32, {4});
  testing::fill_uniform(b, 9);
  OnDevice x(DType::F32, {3, 0}), w(DType::F32, {4, 0}), db(b), y(DType::F32, {3, 4});
  matmul(x.t(), w.t(), db.t(), y.t());  // K = 0: y = bias
  const Owned yh = y.to_host();
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t n = 0; n < 4; ++n) EXPECT_EQ(yh.f(m * 4 + n), b.f(n));
  OnDevice y2(DType::F32, {3, 4});
  matmul(x.t(), w.t(), Tensor(), y2.t());  // K = 0, no bias: y = 0
  const Owned y2h = y2.to_host();
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(y2h.f(i), 0.0f);
  OnDevice x0(DType::F32, {0, 5}), w0(DType::F32, {4, 5}), y0(DType::F32, {0, 4});
  matmul(x0.t(), w0.t(), Tensor(), y0.t());  // M = 0: nothing to do
  cuda::synchronize();
}

TEST(CudaMatmul, MixedDevicesAreAnError) {
  RINGLM_REQUIRE_GPU();
  Owned x(DType::F32, {2, 3}), w(DType::F32, {4, 3});
  OnDevice dw(w), dy(DType::F32, {2, 4});
  EXPECT_THROW(matmul(x.t(), dw.t(), Tensor(), dy.t()), Error);
}

}  // namespace
}  // namespace ringlm::ops
