// The decode GEMV behind cuda::matmul (backends/cuda/gemv.h) for BF16/F16 weights: against the
// scalar reference for M = 1..17 (crossing kGemvMaxRows, where cuBLAS takes over), odd N, K a
// multiple of 8, strided and misaligned rows, with and without bias; batch invariance bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cuda/gemv.h"
#include "cuda_test_util.h"
#include "op_checks.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "ops/weight.h"

namespace ringlm::ops {
namespace {

using testing::kEps;
using testing::OnDevice;
using testing::Owned;

const DType kGemvTypes[] = {DType::BF16, DType::F16};

struct KN {
  int64_t K, N;
};
// K multiples of 8 below, at and above one chunk per thread (256 threads · 8 values = 2048) and
// not a multiple of it; N odd, below and above the block's 4 columns.
const std::vector<KN> kShapes = {{8, 1}, {24, 5}, {1032, 3}, {2048, 130}, {4104, 37}};

TEST(CudaGemv, MatchesReferenceAcrossTheRowBound) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    for (const KN& s : kShapes) {
      for (int64_t M = 1; M <= 17; ++M) {
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " M=" << M << " K="
                                            << s.K << " N=" << s.N << " bias=" << with_bias);
          Owned x(DType::F32, {M, s.K}), w(wt, {s.N, s.K}), b(DType::BF16, {s.N});
          testing::fill_uniform(x, static_cast<uint32_t>(M));
          testing::fill_uniform(w, 2);
          testing::fill_uniform(b, 3);
          OnDevice dx(x), dw(w), db(b), dy(DType::F32, {M, s.N});
          matmul(dx.t(), dw.t(), with_bias ? db.t() : Tensor(), dy.t());
          ASSERT_TRUE(
              testing::matches_reference_matmul(dy.to_host(), x, w, with_bias ? &b : nullptr));
        }
      }
    }
  }
}

// Small integers: every product and partial sum is an exact f32 integer, so the GEMV equals the
// reference bit for bit whatever its order.
TEST(CudaGemv, ExactOnSmallIntegers) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    for (int64_t M : {int64_t{1}, int64_t{5}, cuda::kGemvMaxRows}) {
      SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " M=" << M);
      ASSERT_TRUE(testing::exact_on_small_integers(
          wt, M, 4104, 37, [](const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
            matmul(x, w, b, y);
          }));
    }
  }
}

// x and y as row views inside wider buffers: x rows 4 floats apart beyond K (16-byte aligned
// loads) and 5 apart (scalar loads), y rows 3 apart; y's padding must stay untouched.
TEST(CudaGemv, StridedRows) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    for (int64_t x_pad : {int64_t{4}, int64_t{5}}) {
      for (int64_t M : {int64_t{1}, int64_t{3}, cuda::kGemvMaxRows}) {
        SCOPED_TRACE(::testing::Message()
                     << testing::dtype_label(wt) << " x_pad=" << x_pad << " M=" << M);
        const int64_t K = 520, N = 9;
        Owned w(wt, {N, K}), b(DType::F16, {N});
        testing::fill_small_ints(w, 8);
        testing::fill_small_ints(b, 9);
        OnDevice dw(w), db(b);
        ASSERT_TRUE(testing::strided_rows_match(
            {M, K, N, x_pad, 7, 10},
            [&](const Tensor& x, Tensor& y) { matmul(x, dw.t(), db.t(), y); },
            [&](const Tensor& x, Tensor& y) { reference::matmul(x, w.t(), b.t(), y); }));
      }
    }
  }
}

// Row i of an M-row call equals the same row computed alone, bit for bit, for every M up to the
// bound (random values: the summation order must not depend on M).
TEST(CudaGemv, BatchInvariantUpToTheRowBound) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    const int64_t K = 4104, N = 131;
    const int64_t M = cuda::kGemvMaxRows;
    Owned x(DType::F32, {M, K}), w(wt, {N, K}), b(DType::F32, {N});
    testing::fill_uniform(x, 11);
    testing::fill_uniform(w, 12);
    testing::fill_uniform(b, 13);
    OnDevice dx(x), dw(w), db(b);
    // Each row alone.
    std::vector<Owned> alone;
    for (int64_t i = 0; i < M; ++i) {
      OnDevice y1(DType::F32, {1, N});
      Tensor row = dx.t().slice_rows(i, i + 1);
      matmul(row, dw.t(), db.t(), y1.t());
      alone.push_back(y1.to_host());
    }
    for (int64_t rows = 1; rows <= M; ++rows) {
      OnDevice y(DType::F32, {rows, N});
      matmul(dx.t().slice_rows(0, rows), dw.t(), db.t(), y.t());
      const Owned yh = y.to_host();
      for (int64_t i = 0; i < rows; ++i) {
        ASSERT_TRUE(
            testing::bitwise_equal(yh.t().slice_rows(i, i + 1), alone[static_cast<size_t>(i)].t()))
            << testing::dtype_label(wt) << " row " << i << " of " << rows;
      }
    }
  }
}

// Narrow matmuls (N <= 2048) run 2 columns per block, wider ones 4: an output's bits must not
// depend on which. The first 2048 weight rows of a 2050-column matmul equal a 2048-column one.
TEST(CudaGemv, ColumnsPerBlockDoNotChangeBits) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    for (int64_t M = 2; M <= cuda::kGemvMaxRows; ++M) {
      // Widths that take different columns per block: 2048, 2050 and 4100 (wider launches may
      // use more columns per block).
      const int64_t K = 1032, narrow = 2048, wide = 2050, wider = 4100;
      Owned x(DType::F32, {M, K}), w(wt, {wider, K});
      testing::fill_uniform(x, 21);
      testing::fill_uniform(w, 22);
      OnDevice dx(x), dw(w), y_narrow(DType::F32, {M, narrow}), y_wide(DType::F32, {M, wide}),
          y_wider(DType::F32, {M, wider});
      matmul(dx.t(), dw.t().slice_rows(0, narrow), Tensor(), y_narrow.t());
      matmul(dx.t(), dw.t().slice_rows(0, wide), Tensor(), y_wide.t());
      matmul(dx.t(), dw.t(), Tensor(), y_wider.t());
      const Owned a = y_narrow.to_host(), b = y_wide.to_host(), c = y_wider.to_host();
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < narrow; ++n) {
          ASSERT_EQ(a.f(m * narrow + n), b.f(m * wide + n))
              << testing::dtype_label(wt) << " M=" << M << " n=" << n;
          ASSERT_EQ(a.f(m * narrow + n), c.f(m * wider + n))
              << testing::dtype_label(wt) << " M=" << M << " n=" << n;
        }
      }
    }
  }
}

// matmul_many over 16-bit weights runs them as one GEMV launch (cuda::gemv_many) up to
// kGemvMaxRows rows, and above as cuBLAS GEMMs on x rounded once (cuda::matmul_shared_input):
// each output equals its separate matmul bit for bit — q/k/v-like shapes (N = 2048, 512) and an
// odd N, with and without bias. With an f32 weight among them (which neither path serves) the
// targets go back to separate matmuls: still equal.
TEST(CudaGemv, ManyEqualsSeparateBitwise) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    for (bool with_f32 : {false, true}) {
      for (int64_t M : {int64_t{1}, cuda::kGemvMaxRows, cuda::kGemvMaxRows + 3, int64_t{33}}) {
        SCOPED_TRACE(::testing::Message()
                     << testing::dtype_label(wt) << " M=" << M << " f32 target=" << with_f32);
        const int64_t K = 1032;
        Owned x(DType::F32, {M, K}), w0(wt, {2048, K}), w1(wt, {37, K}),
            w2(with_f32 ? DType::F32 : wt, {512, K}), b0(DType::BF16, {2048}),
            b2(DType::F32, {512});
        testing::fill_uniform(x, 31);
        testing::fill_uniform(w0, 32);
        testing::fill_uniform(w1, 33);
        testing::fill_uniform(w2, 34);
        testing::fill_uniform(b0, 35);
        testing::fill_uniform(b2, 36);
        OnDevice dx(x), dw0(w0), dw1(w1), dw2(w2), db0(b0), db2(b2);
        OnDevice y0(DType::F32, {M, 2048}), y1(DType::F32, {M, 37}), y2(DType::F32, {M, 512});
        OnDevice s0(DType::F32, {M, 2048}), s1(DType::F32, {M, 37}), s2(DType::F32, {M, 512});
        const Weight wa(dw0.t()), wb(dw1.t()), wc(dw2.t());
        const Tensor ba = db0.t(), bb, bc = db2.t();
        Tensor ya = y0.t(), yb = y1.t(), yc = y2.t();
        const MatmulTarget targets[] = {{&wa, &ba, &ya}, {&wb, &bb, &yb}, {&wc, &bc, &yc}};
        matmul_many(dx.t(), targets);
        Tensor sa = s0.t(), sb = s1.t(), sc = s2.t();
        matmul(dx.t(), wa, ba, sa);
        matmul(dx.t(), wb, bb, sb);
        matmul(dx.t(), wc, bc, sc);
        EXPECT_TRUE(testing::bitwise_equal(y0.to_host().t(), s0.to_host().t()));
        EXPECT_TRUE(testing::bitwise_equal(y1.to_host().t(), s1.to_host().t()));
        EXPECT_TRUE(testing::bitwise_equal(y2.to_host().t(), s2.to_host().t()));
      }
    }
  }
}

// gate, up and the gated activation in one GEMV launch = the two matmuls then
// gated_activation, bit for bit, for both activations, narrow (N <= 1024 per matrix: 1 column
// pair per block) and wide (2 pairs) launches, an odd N (the last block's second pair is past N),
// biases, and out written over gate's buffer; M = 3 takes the unfused path (cuBLAS) and must
// equal the composition too.
TEST(CudaGemv, GatedEqualsMatmulsThenActivationBitwise) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : kGemvTypes) {
    for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
      for (int64_t N : {int64_t{1000}, int64_t{1433}}) {
        for (int64_t M = 1; M <= cuda::kGemvMaxRows + 1; ++M) {
          SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " act="
                                            << static_cast<int>(act) << " N=" << N << " M=" << M);
          const int64_t K = 776;
          Owned x(DType::F32, {M, K}), wg(wt, {N, K}), wu(wt, {N, K}), bg(DType::BF16, {N});
          testing::fill_uniform(x, 41, -2.0f, 2.0f);
          testing::fill_uniform(wg, 42);
          testing::fill_uniform(wu, 43);
          testing::fill_uniform(bg, 44);
          OnDevice dx(x), dwg(wg), dwu(wu), dbg(bg);
          OnDevice gate(DType::F32, {M, N}), up(DType::F32, {M, N});
          OnDevice sgate(DType::F32, {M, N}), sup(DType::F32, {M, N}), sout(DType::F32, {M, N});
          const Weight weight_g(dwg.t()), weight_u(dwu.t());
          const Tensor bias_g = dbg.t(), no_bias;
          Tensor g = gate.t(), u = up.t();
          gated_matmul(dx.t(), {&weight_g, &bias_g, &g}, {&weight_u, &no_bias, &u}, act, g);
          Tensor sg = sgate.t(), su = sup.t(), so = sout.t();
          matmul(dx.t(), weight_g, bias_g, sg);
          matmul(dx.t(), weight_u, no_bias, su);
          gated_activation(sg, su, act, so);
          EXPECT_TRUE(testing::bitwise_equal(gate.to_host().t(), sout.to_host().t()));
        }
      }
    }
  }
}

// Persistent two-row launches (fewer blocks than column tiles, each walking several and loading
// the next tile's weights while reducing the current) give the bits of one block per tile: matmuls
// with more tiles than the GPU holds blocks (8, 4 and 2 columns per tile; K of one, several and
// a partial pass of chunks), three targets in one launch, and the gated launch.
TEST(CudaGemv, PersistentEqualsOneBlockPerTileBitwise) {
  RINGLM_REQUIRE_GPU();
  ASSERT_TRUE(cuda::gemv_persistent());
  struct Shape {
    int64_t K, N;
  };
  for (const Shape& sh :
       {Shape{4096, 6144}, Shape{14336, 4096}, Shape{1032, 3000}, Shape{776, 1000}}) {
    for (int64_t M = 2; M <= cuda::kGemvMaxRows; ++M) {
      SCOPED_TRACE(::testing::Message() << "K=" << sh.K << " N=" << sh.N << " M=" << M);
      Owned x(DType::F32, {M, sh.K}), w(DType::BF16, {sh.N, sh.K}), b(DType::BF16, {sh.N});
      testing::fill_uniform(x, 61, -2.0f, 2.0f);
      testing::fill_uniform(w, 62);
      testing::fill_uniform(b, 63);
      const OnDevice dx(x), dw(w), db(b);
      const Weight weight(dw.t());
      const Tensor bias = db.t(), no_bias;
      Owned results[2][4];  // [persistent][plain matmul, three targets..., gated]
      for (int persistent = 0; persistent < 2; ++persistent) {
        cuda::set_gemv_persistent(persistent == 1);
        OnDevice y(DType::F32, {M, sh.N});
        matmul(dx.t(), weight, bias, y.t());
        results[persistent][0] = y.to_host();
        // Three targets: the same weights thrice (one launch of three segments).
        OnDevice y1(DType::F32, {M, sh.N}), y2(DType::F32, {M, sh.N}), y3(DType::F32, {M, sh.N});
        const MatmulTarget targets[] = {
            {&weight, &bias, &y1.t()}, {&weight, &no_bias, &y2.t()}, {&weight, &bias, &y3.t()}};
        matmul_many(dx.t(), targets);
        results[persistent][1] = y2.to_host();
        results[persistent][2] = y3.to_host();
        OnDevice gate(DType::F32, {M, sh.N}), up(DType::F32, {M, sh.N});
        gated_matmul(dx.t(), {&weight, &bias, &gate.t()}, {&weight, &no_bias, &up.t()},
                     Activation::SiLU, gate.t());
        results[persistent][3] = gate.to_host();
      }
      cuda::set_gemv_persistent(true);
      for (int r = 0; r < 4; ++r)
        EXPECT_TRUE(testing::bitwise_equal(results[0][r].t(), results[1][r].t())) << "result " << r;
    }
  }
}

}  // namespace
}  // namespace ringlm::ops
