// matmul vs the scalar reference, on every SIMD target, weight dtype and odd size; and batch
// invariance (a row's output is bitwise the same alone, in any batch, under any thread split).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::for_each_simd_target;
using testing::kEps;
using testing::Owned;

struct Case {
  int64_t M, K, N;
};

// Sizes that hit every tail: K below, at and across vector widths (1, 3, 17, 1023), N around the
// register tiles (1, 5, 257), M across the 4-row tile (1, 2, 7, 33).
const std::vector<Case> kCases = {{1, 1, 1},     {2, 3, 5},      {7, 17, 257},
                                  {33, 1023, 5}, {1, 1023, 257}, {33, 17, 257},
                                  {7, 1, 5},     {2, 1023, 1},   {33, 3, 1}};
const DType kWeightTypes[] = {DType::F32, DType::BF16, DType::F16};

TEST(Matmul, MatchesReferenceOnRandomInputs) {
  for_each_simd_target([](const std::string&) {
    for (DType wt : kWeightTypes) {
      for (const Case& c : kCases) {
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " M=" << c.M << " K="
                                            << c.K << " N=" << c.N << " bias=" << with_bias);
          Owned x(DType::F32, {c.M, c.K}), w(wt, {c.N, c.K}), b(wt, {c.N});
          Owned y(DType::F32, {c.M, c.N}), ref(DType::F32, {c.M, c.N});
          testing::fill_uniform(x, 1);
          testing::fill_uniform(w, 2);
          testing::fill_uniform(b, 3);
          const Tensor bias = with_bias ? b.t() : Tensor();
          matmul(x.t(), w.t(), bias, y.t());
          reference::matmul(x.t(), w.t(), bias, ref.t());
          // Tolerance: any order of K f32 FMAs plus a bias add is within (K + 2)·u·(Σ|x·w| + |b|)
          // of the exact result (Higham's γ_n bound). The reference is exact to ~1e-16 (double).
          for (int64_t m = 0; m < c.M; ++m) {
            for (int64_t n = 0; n < c.N; ++n) {
              double mag = with_bias ? std::fabs(b.f(n)) : 0.0;
              for (int64_t k = 0; k < c.K; ++k)
                mag += std::fabs(double{x.f(m * c.K + k)} * w.f(n * c.K + k));
              const double tol = static_cast<double>(c.K + 2) * kEps * mag + 1e-30;
              ASSERT_NEAR(y.f(m * c.N + n), ref.f(m * c.N + n), tol) << "m=" << m << " n=" << n;
            }
          }
        }
      }
    }
  });
}

// With small integer inputs every partial sum is exact in f32, whatever the order: a correct
// kernel equals the reference bit for bit, so any indexing or conversion slip shows.
TEST(Matmul, ExactOnSmallIntegers) {
  for_each_simd_target([](const std::string&) {
    for (DType wt : kWeightTypes) {
      for (const Case& c : kCases) {
        SCOPED_TRACE(::testing::Message()
                     << testing::dtype_label(wt) << " M=" << c.M << " K=" << c.K << " N=" << c.N);
        Owned x(DType::F32, {c.M, c.K}), w(wt, {c.N, c.K}), b(wt, {c.N});
        Owned y(DType::F32, {c.M, c.N}), ref(DType::F32, {c.M, c.N});
        testing::fill_small_ints(x, 4);
        testing::fill_small_ints(w, 5);
        testing::fill_small_ints(b, 6, 100);
        matmul(x.t(), w.t(), b.t(), y.t());
        reference::matmul(x.t(), w.t(), b.t(), ref.t());
        ASSERT_TRUE(testing::bitwise_equal(y.t(), ref.t()));
      }
    }
  });
}

// x and y as row views inside wider buffers (rows further apart than K / N).
TEST(Matmul, StridedRows) {
  const int64_t M = 7, K = 19, N = 9;
  Owned xbuf(DType::F32, {M, K + 5}), w(DType::BF16, {N, K}), ybuf(DType::F32, {M, N + 3});
  Owned ref(DType::F32, {M, N});
  testing::fill_small_ints(xbuf, 7);
  testing::fill_small_ints(w, 8);
  Tensor x = xbuf.t(), y = ybuf.t();
  x.shape[1] = K;
  y.shape[1] = N;
  matmul(x, w.t(), Tensor(), y);
  reference::matmul(x, w.t(), Tensor(), ref.t());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) ASSERT_EQ(y.row<float>(m)[n], ref.f(m * N + n));
}

TEST(Matmul, ZeroSizes) {
  Owned x(DType::F32, {3, 0}), w(DType::F32, {4, 0}), b(DType::F32, {4}), y(DType::F32, {3, 4});
  testing::fill_uniform(b, 9);
  matmul(x.t(), w.t(), b.t(), y.t());  // K = 0: y = bias
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t n = 0; n < 4; ++n) EXPECT_EQ(y.f(m * 4 + n), b.f(n));
  Owned x0(DType::F32, {0, 5}), w0(DType::F32, {4, 5}), y0(DType::F32, {0, 4});
  matmul(x0.t(), w0.t(), Tensor(), y0.t());  // M = 0: nothing to do, no crash
}

// Batch invariance: row r of a batch equals the same row computed alone, bitwise, for batches of
// 1, 7 and 33 rows and 1, 2 and 3 threads (different tiles and column/row splits).
TEST(Matmul, BatchInvariant) {
  for_each_simd_target([](const std::string&) {
    for (DType wt : kWeightTypes) {
      // N = 257 splits columns across threads, N = 5 splits rows.
      for (auto [K, N] : {std::pair<int64_t, int64_t>{17, 257}, {1023, 257}, {1023, 5}}) {
        const int64_t M = 33;
        SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " K=" << K << " N=" << N);
        Owned x(DType::F32, {M, K}), w(wt, {N, K}), b(DType::F32, {N});
        testing::fill_uniform(x, 10);
        testing::fill_uniform(w, 11);
        testing::fill_uniform(b, 12);
        // Each row alone, single thread.
        std::vector<Owned> alone;
        {
          testing::ScopedThreads threads(1);
          for (int64_t m = 0; m < M; ++m) {
            alone.emplace_back(DType::F32, std::initializer_list<int64_t>{1, N});
            matmul(x.t().slice_rows(m, m + 1), w.t(), b.t(), alone.back().t());
          }
        }
        for (int threads : {1, 2, 3}) {
          testing::ScopedThreads scoped(threads);
          for (int64_t batch : {int64_t{7}, M}) {
            for (int64_t start = 0; start + batch <= M; start += batch) {
              Owned y(DType::F32, {batch, N});
              matmul(x.t().slice_rows(start, start + batch), w.t(), b.t(), y.t());
              for (int64_t m = 0; m < batch; ++m) {
                ASSERT_TRUE(testing::bitwise_equal(y.t().slice_rows(m, m + 1),
                                                   alone[static_cast<size_t>(start + m)].t()))
                    << "threads=" << threads << " batch=" << batch << " row=" << start + m;
              }
            }
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace ringlm::ops
