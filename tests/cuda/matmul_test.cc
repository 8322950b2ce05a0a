// GPU matmul vs the scalar reference (ops/reference.h): every weight dtype, odd sizes, bias,
// strided rows, zero sizes, and bit-exact small-integer products.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_util.h"
#include "op_checks.h"
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

TEST(CudaMatmul, MatchesReferenceOnRandomInputs) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kWeightTypes) {
    for (const Case& c : kCases) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " M=" << c.M
                                          << " K=" << c.K << " N=" << c.N << " bias=" << with_bias);
        Owned x(DType::F32, {c.M, c.K}), w(wt, {c.N, c.K}), b(wt, {c.N});
        testing::fill_uniform(x, 1);
        testing::fill_uniform(w, 2);
        testing::fill_uniform(b, 3);
        OnDevice dx(x), dw(w), db(b), dy(DType::F32, {c.M, c.N});
        matmul(dx.t(), dw.t(), with_bias ? db.t() : Tensor(), dy.t());
        ASSERT_TRUE(
            testing::matches_reference_matmul(dy.to_host(), x, w, with_bias ? &b : nullptr));
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
      ASSERT_TRUE(testing::exact_on_small_integers(
          wt, c.M, c.K, c.N, [](const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
            matmul(x, w, b, y);
          }));
    }
  }
}

// x and y as row views inside wider buffers (rows further apart than K / N); the padding of y
// must stay untouched.
TEST(CudaMatmul, StridedRows) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kWeightTypes) {
    SCOPED_TRACE(testing::dtype_label(wt));
    const int64_t M = 7, K = 19, N = 9;
    Owned w(wt, {N, K}), b(DType::BF16, {N});
    testing::fill_small_ints(w, 8);
    testing::fill_small_ints(b, 9);
    OnDevice dw(w), db(b);
    ASSERT_TRUE(testing::strided_rows_match(
        {M, K, N, 5, 7, 10}, [&](const Tensor& x, Tensor& y) { matmul(x, dw.t(), db.t(), y); },
        [&](const Tensor& x, Tensor& y) { reference::matmul(x, w.t(), b.t(), y); }));
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
