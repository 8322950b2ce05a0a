// The Hopper decode GEMM behind cuda::matmul (backends/cuda/stream_gemm.h) for BF16/F16 weights
// at 17-256 rows: against the scalar reference for each row-tile width, both weight-tile widths
// (128 and 256 rows) and K and N cut between CTAs (stream-K partial sums, reduced in slices) or
// not, with and without bias (its accumulate path); exact on small integers; strided rows;
// repeated launches (the counters re-arm); bit-identical rows at every M of one tile width.
#include <gtest/gtest.h>

#include <vector>

#include "backends/cuda/stream_gemm.h"
#include "cuda_test_util.h"
#include "op_checks.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::OnDevice;
using testing::Owned;

const DType kTypes[] = {DType::BF16, DType::F16};

// Each test runs with the kernel switched on at its default bound (whatever the environment
// says) and leaves the process's settings as it found them.
class CudaStreamGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    RINGLM_REQUIRE_GPU();
    if (!cuda::stream_gemm_device_supported()) GTEST_SKIP() << "not a Hopper GPU";
    was_enabled_ = cuda::stream_gemm_enabled();
    was_min_rows_ = cuda::stream_gemm_min_rows();
    was_wide_ = cuda::stream_gemm_wide_tiles();
    cuda::set_stream_gemm(true);
    cuda::set_stream_gemm_min_rows(17);
    switched_ = true;
  }
  void TearDown() override {
    if (!switched_) return;
    cuda::set_stream_gemm(was_enabled_);
    cuda::set_stream_gemm_min_rows(was_min_rows_);
    cuda::set_stream_gemm_wide_tiles(was_wide_);
  }

 private:
  bool switched_ = false, was_enabled_ = false, was_wide_ = true;
  int64_t was_min_rows_ = 17;
};

struct KN {
  int64_t K, N;
};
// With 132 (H100) or more SMs: one tile of 4 chunks (each chunk its own CTA: a 4-way cut), 3
// whole one-chunk tiles and a ragged last tile, 8 tiles × 17 chunks (cuts at odd places), 2 tiles
// × 64 chunks with K a multiple of 8 but not of 64.
const std::vector<KN> kShapes = {{200, 5}, {64, 257}, {1032, 1000}, {4104, 131}};
// Every row-tile width (32, 64, 128, 192, 256) at and off its bound.
const std::vector<int64_t> kRows = {17, 31, 64, 100, 129, 192, 256};

// y = x · wᵀ (+ bias) through ops::matmul, checking that the call ran stream_gemm.
void run_matmul(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const int64_t before = cuda::stream_gemm_count();
  matmul(x, w, bias, y);
  ASSERT_EQ(cuda::stream_gemm_count(), before + 1) << "the matmul did not take stream_gemm";
}

TEST_F(CudaStreamGemm, MatchesReference) {
  for (const bool wide : {true, false}) {
    cuda::set_stream_gemm_wide_tiles(wide);
    for (DType wt : kTypes) {
      for (const KN& s : kShapes) {
        Owned w(wt, {s.N, s.K}), b(DType::BF16, {s.N});
        testing::fill_uniform(w, 2);
        testing::fill_uniform(b, 3);
        OnDevice dw(w), db(b);
        for (int64_t M : kRows) {
          const bool with_bias = M % 2 == 1;
          SCOPED_TRACE(::testing::Message()
                       << testing::dtype_label(wt) << " M=" << M << " K=" << s.K << " N=" << s.N
                       << " bias=" << with_bias << " wide=" << wide);
          Owned x(DType::F32, {M, s.K});
          testing::fill_uniform(x, static_cast<uint32_t>(M));
          OnDevice dx(x), dy(DType::F32, {M, s.N});
          run_matmul(dx.t(), dw.t(), with_bias ? db.t() : Tensor(), dy.t());
          ASSERT_TRUE(
              testing::matches_reference_matmul(dy.to_host(), x, w, with_bias ? &b : nullptr));
        }
      }
    }
  }
}

// Small integers: every product and partial sum is an exact f32 integer, so the kernel equals
// the reference bit for bit whatever its cut of K.
TEST_F(CudaStreamGemm, ExactOnSmallIntegers) {
  for (DType wt : kTypes) {
    for (int64_t M : {int64_t{17}, int64_t{200}}) {
      SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " M=" << M);
      ASSERT_TRUE(testing::exact_on_small_integers(wt, M, 4104, 300, run_matmul));
    }
  }
}

// y's rows further apart than N (its padding must stay untouched), and x's rows further apart
// than K both as F32 (rounded into scratch first) and as 16-bit rows the kernel reads in place
// (against cuBLAS on the same call: exact on small integers).
TEST_F(CudaStreamGemm, StridedRows) {
  for (DType wt : kTypes) {
    SCOPED_TRACE(testing::dtype_label(wt));
    const int64_t M = 40, K = 136, N = 300;
    Owned w(wt, {N, K}), b(DType::BF16, {N});
    testing::fill_small_ints(w, 8);
    testing::fill_small_ints(b, 9);
    OnDevice dw(w), db(b);
    ASSERT_TRUE(testing::strided_rows_match(
        {M, K, N, 8, 7, 10}, [&](const Tensor& x, Tensor& y) { run_matmul(x, dw.t(), db.t(), y); },
        [&](const Tensor& x, Tensor& y) { reference::matmul(x, w.t(), b.t(), y); }));

    Owned x16(wt, {M, K + 24});
    testing::fill_small_ints(x16, 10);
    OnDevice dx16(x16), mine(DType::F32, {M, N}), cublas(DType::F32, {M, N});
    Tensor xv = dx16.t();
    xv.shape[1] = K;  // rows K + 24 apart
    run_matmul(xv, dw.t(), Tensor(), mine.t());
    cuda::set_stream_gemm(false);
    matmul(xv, dw.t(), Tensor(), cublas.t());
    cuda::set_stream_gemm(true);
    EXPECT_TRUE(testing::bitwise_equal(mine.to_host().t(), cublas.to_host().t()));
  }
}

// Row m of an M-row call is the same bits for every M served with one weight-tile width, and
// again on a second launch: the cut of K depends on (N, K, the tile width) alone, partial sums
// are added in k order, and the last CTA to reduce a cut tile re-arms its counters. With narrow
// tiles that is every M from 17 to 256; with wide ones (M <= 128) every M from 17 to 128.
TEST_F(CudaStreamGemm, RowsAreTheSameBitsAtEveryM) {
  struct Family {
    bool wide;
    int64_t widest;
    std::vector<int64_t> rows;
  };
  const std::vector<Family> families = {
      {false, cuda::kStreamGemmMaxRows, {17, 32, 33, 64, 65, 128, 129, 192, 193, 255}},
      {true, 128, {17, 32, 33, 64, 65, 100, 127}}};
  for (const Family& family : families) {
    cuda::set_stream_gemm_wide_tiles(family.wide);
    for (DType wt : kTypes) {
      const int64_t K = 4096, N = 1000, M = family.widest;
      Owned x(DType::F32, {M, K}), w(wt, {N, K});
      testing::fill_uniform(x, 21);
      testing::fill_uniform(w, 22);
      OnDevice dx(x), dw(w), full(DType::F32, {M, N}), again(DType::F32, {M, N});
      run_matmul(dx.t(), dw.t(), Tensor(), full.t());
      run_matmul(dx.t(), dw.t(), Tensor(), again.t());
      const Owned want = full.to_host();
      ASSERT_TRUE(testing::bitwise_equal(again.to_host().t(), want.t()))
          << testing::dtype_label(wt) << " second launch, wide=" << family.wide;
      for (int64_t rows : family.rows) {
        OnDevice y(DType::F32, {rows, N});
        run_matmul(dx.t().slice_rows(0, rows), dw.t(), Tensor(), y.t());
        EXPECT_TRUE(testing::bitwise_equal(y.to_host().t(), want.t().slice_rows(0, rows)))
            << testing::dtype_label(wt) << " M=" << rows << " wide=" << family.wide;
      }
    }
  }
}

// Outside its bounds the matmul goes elsewhere: 16 rows and 257 (cuBLAS or the GEMV), F32
// weights, K not a multiple of 8; switched off, nothing.
TEST_F(CudaStreamGemm, OnlyServesItsCalls) {
  struct Call {
    DType wt;
    int64_t M, K;
  };
  for (const Call& c : std::vector<Call>{{DType::BF16, 16, 64},
                                         {DType::BF16, 257, 64},
                                         {DType::F32, 64, 64},
                                         {DType::F16, 64, 60}}) {
    Owned x(DType::F32, {c.M, c.K}), w(c.wt, {9, c.K});
    testing::fill_uniform(x, 30);
    testing::fill_uniform(w, 31);
    OnDevice dx(x), dw(w), dy(DType::F32, {c.M, 9});
    const int64_t before = cuda::stream_gemm_count();
    matmul(dx.t(), dw.t(), Tensor(), dy.t());
    EXPECT_EQ(cuda::stream_gemm_count(), before) << "M=" << c.M << " K=" << c.K;
  }
  Owned x(DType::F32, {64, 64}), w(DType::BF16, {9, 64});
  OnDevice dx(x), dw(w), dy(DType::F32, {64, 9});
  cuda::set_stream_gemm(false);
  const int64_t before = cuda::stream_gemm_count();
  matmul(dx.t(), dw.t(), Tensor(), dy.t());
  cuda::set_stream_gemm(true);
  EXPECT_EQ(cuda::stream_gemm_count(), before);
  cuda::synchronize();
}

}  // namespace
}  // namespace ringlm::ops
