// GPU row-wise ops vs the scalar references: embedding, rms_norm, add_inplace, gated activations,
// softmax, argmax, softcap. Odd row lengths, strided rows, in-place use, vocab-sized rows.
//
// Tolerances follow tests/ops/elementwise_test.cc (f32 error bounds of each formula), widened
// where CUDA's math library is looser than the CPU's: expf, tanhf, sinf and cosf are within 2 ulp
// (CUDA C++ Programming Guide, "Mathematical Functions"), i.e. ≤ 4u relative.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "op_checks.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::copy_of;
using testing::kEps;
using testing::OnDevice;
using testing::Owned;

const int64_t kRowLengths[] = {1, 3, 17, 64, 257, 1023, 4099};
const int64_t kRowCounts[] = {1, 2, 7};

TEST(CudaEmbedding, MatchesReferenceExactly) {
  RINGLM_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (float scale : {1.0f, 8.0f, 0.3f}) {
      const int64_t V = 11, H = 37, M = 9;
      Owned table(dt, {V, H}), ids(DType::I32, {M});
      testing::fill_uniform(table, 20);
      for (int64_t m = 0; m < M; ++m) ids.p<int32_t>()[m] = static_cast<int32_t>((m * 7 + 3) % V);
      Owned ref(DType::F32, {M, H});
      OnDevice dtable(table), dids(ids), dout(DType::F32, {M, H});
      embedding(dids.t(), dtable.t(), scale, dout.t());
      reference::embedding(ids.t(), table.t(), scale, ref.t());
      // Exact: widening is exact and the scale is one f32 multiply in both.
      EXPECT_TRUE(testing::bitwise_equal(dout.to_host().t(), ref.t())) << testing::dtype_label(dt);
    }
  }
}

// A token id outside the vocabulary: its row stays NaN and cuda::synchronize() throws, naming the
// id and its index (op_checks.h).
TEST(CudaEmbedding, BadIdIsReportedBySynchronize) {
  RINGLM_REQUIRE_GPU();
  Owned table(DType::BF16, {5, 8});
  testing::fill_uniform(table, 1);
  OnDevice dtable(table), dids(testing::ids_with_a_bad_one()), dout(DType::F32, {3, 8});
  embedding(dids.t(), dtable.t(), 1.0f, dout.t());
  const Owned out = testing::expect_bad_id_reported(dout);
  for (int64_t h = 0; h < 8; ++h) EXPECT_EQ(out.f(h), table.f(8 + h));
}

TEST(CudaRmsNorm, MatchesReference) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : {DType::F32, DType::BF16, DType::F16}) {
    for (bool unit_offset : {false, true}) {
      for (int64_t H : kRowLengths) {
        for (int64_t M : kRowCounts) {
          SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " H=" << H << " M=" << M
                                            << " unit_offset=" << unit_offset);
          Owned x(DType::F32, {M, H}), w(wt, {H}), ref(DType::F32, {M, H});
          testing::fill_uniform(x, 21, -3.0f, 3.0f);
          testing::fill_uniform(w, 22);
          const RmsNormConfig cfg{1e-5f, unit_offset};
          OnDevice dx(x), dw(w), dout(DType::F32, {M, H});
          rms_norm(dx.t(), dw.t(), cfg, dout.t());
          reference::rms_norm(x.t(), w.t(), cfg, ref.t());
          // The f32 sum of H squares is within (H + 2)·u relative; mean, +eps, sqrt and 1/x add
          // ~3u; the square root halves the sum's error; two products add 2u (any order, FMA).
          const double rel = ((static_cast<double>(H) + 2) / 2 + 6) * kEps;
          const Owned out = dout.to_host();
          for (int64_t i = 0; i < M * H; ++i)
            ASSERT_NEAR(out.f(i), ref.f(i), rel * std::fabs(ref.f(i)) + 1e-30) << "i=" << i;
          // In place (out aliases x) gives the same bits.
          rms_norm(dx.t(), dw.t(), cfg, dx.t());
          ASSERT_TRUE(testing::bitwise_equal(dx.to_host().t(), out.t()));
        }
      }
    }
  }
}

// The fused kernel = add_inplace then rms_norm on the GPU, bit for bit: out separate, aliasing
// the residual (the decoder's use) and aliasing x; row lengths for both norm kernels.
TEST(CudaAddRmsNorm, EqualsAddThenNormBitwise) {
  RINGLM_REQUIRE_GPU();
  for (DType wt : {DType::F32, DType::BF16}) {
    for (int64_t H : kRowLengths) {
      for (int64_t M : kRowCounts) {
        SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " H=" << H << " M=" << M);
        Owned x(DType::F32, {M, H}), r(DType::F32, {M, H}), w(wt, {H});
        testing::fill_uniform(x, 41, -3.0f, 3.0f);
        testing::fill_uniform(r, 42, -3.0f, 3.0f);
        testing::fill_uniform(w, 43);
        const RmsNormConfig cfg{1e-5f, true};
        OnDevice dw(w);
        OnDevice want_x(x), dr(r), want(DType::F32, {M, H});
        add_inplace(want_x.t(), dr.t());
        rms_norm(want_x.t(), dw.t(), cfg, want.t());
        const Owned want_x_host = want_x.to_host(), want_host = want.to_host();

        OnDevice got_x(x), got(DType::F32, {M, H});
        add_rms_norm(got_x.t(), dr.t(), dw.t(), cfg, got.t());
        ASSERT_TRUE(testing::bitwise_equal(got_x.to_host().t(), want_x_host.t()));
        ASSERT_TRUE(testing::bitwise_equal(got.to_host().t(), want_host.t()));

        OnDevice alias_x(x), alias_r(r);
        add_rms_norm(alias_x.t(), alias_r.t(), dw.t(), cfg, alias_r.t());  // out = residual
        ASSERT_TRUE(testing::bitwise_equal(alias_x.to_host().t(), want_x_host.t()));
        ASSERT_TRUE(testing::bitwise_equal(alias_r.to_host().t(), want_host.t()));

        OnDevice inplace(x);
        add_rms_norm(inplace.t(), dr.t(), dw.t(), cfg, inplace.t());  // out = x
        ASSERT_TRUE(testing::bitwise_equal(inplace.to_host().t(), want_host.t()));
      }
    }
  }
}

TEST(CudaAddInplace, MatchesReferenceExactlyWithStridedRows) {
  RINGLM_REQUIRE_GPU();
  for (int64_t H : kRowLengths) {
    Owned xbuf(DType::F32, {3, H + 2}), y(DType::F32, {3, H});
    testing::fill_uniform(xbuf, 23);
    testing::fill_uniform(y, 24);
    OnDevice dx(xbuf), dy(y);
    Tensor xv = dx.t(), xh = xbuf.t();
    xv.shape[1] = H;
    xh.shape[1] = H;
    add_inplace(xv, dy.t());
    Owned ref = copy_of(xbuf);
    Tensor rv = ref.t();
    rv.shape[1] = H;
    reference::add_inplace(rv, y.t());  // padding columns untouched in both
    ASSERT_TRUE(testing::bitwise_equal(dx.to_host().t(), ref.t())) << "H=" << H;
  }
}

TEST(CudaGatedActivation, MatchesReference) {
  RINGLM_REQUIRE_GPU();
  for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
    for (int64_t I : kRowLengths) {
      SCOPED_TRACE(::testing::Message() << "act=" << static_cast<int>(act) << " I=" << I);
      const int64_t M = 3;
      Owned g(DType::F32, {M, I}), u(DType::F32, {M, I}), ref(DType::F32, {M, I});
      testing::fill_uniform(g, 25, -12.0f, 12.0f);
      testing::fill_uniform(u, 26, -2.0f, 2.0f);
      OnDevice dg(g), du(u), dout(DType::F32, {M, I});
      gated_activation(dg.t(), du.t(), act, dout.t());
      reference::gated_activation(g.t(), u.t(), act, ref.t());
      const Owned out = dout.to_host();
      for (int64_t i = 0; i < M * I; ++i) {
        const double gv = g.f(i), uv = u.f(i);
        double tol;
        if (act == Activation::SiLU) {
          // expf (≤ 4u; its error passes through e/(1+e) ≤ 1), 1 + e, g / (...), · up: ≤ 7u.
          tol = 8 * kEps * std::fabs(ref.f(i));
        } else {
          // tanhf ≤ 4u absolute (|tanh| ≤ 1); its f32 argument carries ~4u·|inner|; 1 + tanh
          // cancels as tanh → -1, so bound the absolute error of (1 + tanh) by (6 + 4|inner|)u,
          // scale by ½|g·u|, plus 4u of the result for the final products.
          const double inner = 0.7978845608028654 * (gv + 0.044715 * gv * gv * gv);
          tol = 0.5 * std::fabs(gv * uv) * (12 + 4 * std::fabs(inner)) * kEps +
                4 * kEps * std::fabs(ref.f(i));
        }
        ASSERT_NEAR(out.f(i), ref.f(i), tol + 1e-37) << "g=" << gv << " u=" << uv;
      }
      // In place (out aliases gate).
      gated_activation(dg.t(), du.t(), act, dg.t());
      ASSERT_TRUE(testing::bitwise_equal(dg.to_host().t(), out.t()));
    }
  }
}

TEST(CudaGatedActivation, ExtremeGates) {
  RINGLM_REQUIRE_GPU();
  Owned g(DType::F32, {1, 4}), u(DType::F32, {1, 4});
  const float gates[] = {-200.0f, -90.0f, 90.0f, 200.0f};
  for (int i = 0; i < 4; ++i) {
    g.p<float>()[i] = gates[i];
    u.p<float>()[i] = 1.0f;
  }
  OnDevice dg(g), du(u), dout(DType::F32, {1, 4});
  gated_activation(dg.t(), du.t(), Activation::SiLU, dout.t());
  Owned out = dout.to_host();
  EXPECT_EQ(out.f(0), 0.0f);
  EXPECT_NEAR(out.f(1), 0.0f, 1e-36);
  EXPECT_EQ(out.f(2), 90.0f);
  EXPECT_EQ(out.f(3), 200.0f);
  gated_activation(dg.t(), du.t(), Activation::GeluTanh, dout.t());
  out = dout.to_host();
  EXPECT_EQ(out.f(0), 0.0f);
  EXPECT_EQ(out.f(3), 200.0f);
}

TEST(CudaSoftmax, MatchesReference) {
  RINGLM_REQUIRE_GPU();
  for (int64_t N :
       {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{257}, int64_t{4099}, int64_t{262147}}) {
    for (int64_t M : kRowCounts) {
      SCOPED_TRACE(::testing::Message() << "N=" << N << " M=" << M);
      Owned x(DType::F32, {M, N});
      testing::fill_uniform(x, 27, -8.0f, 8.0f);
      Owned ref = copy_of(x);
      OnDevice dx(x);
      softmax(dx.t());
      reference::softmax(ref.t());
      // e_i: expf's 4u plus the rounding of x - max (≤ u·16); the f32 sum of N terms ≤ (N + 1)u
      // relative (any order); the division u.
      const double rel = (static_cast<double>(N) + 24) * kEps;
      const Owned out = dx.to_host();
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_NEAR(out.f(i), ref.f(i), rel * std::fabs(ref.f(i)) + 1e-37) << "i=" << i;
    }
  }
}

TEST(CudaSoftmax, InfinitiesAndNaN) {
  RINGLM_REQUIRE_GPU();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  Owned x(DType::F32, {3, 5});
  const float rows[3][5] = {{1.0f, -kInf, 2.0f, -kInf, 0.5f},
                            {-kInf, -kInf, -kInf, -kInf, -kInf},
                            {1.0f, NAN, 0.0f, 2.0f, 3.0f}};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) x.p<float>()[r * 5 + c] = rows[r][c];
  Owned ref = copy_of(x);
  OnDevice dx(x);
  softmax(dx.t());
  reference::softmax(ref.t());
  const Owned out = dx.to_host();
  EXPECT_EQ(out.f(1), 0.0f);  // masked entries get exactly 0
  EXPECT_EQ(out.f(3), 0.0f);
  for (int c : {0, 2, 4}) EXPECT_NEAR(out.f(c), ref.f(c), 1e-6);
  for (int c = 0; c < 5; ++c) EXPECT_TRUE(std::isnan(out.f(5 + c)));   // all -inf: NaN
  for (int c = 0; c < 5; ++c) EXPECT_TRUE(std::isnan(out.f(10 + c)));  // any NaN: all NaN
}

TEST(CudaArgmax, MatchesReferenceWithTiesAndNaN) {
  RINGLM_REQUIRE_GPU();
  for (int64_t N :
       {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{257}, int64_t{4099}, int64_t{262147}}) {
    const int64_t M = 4;
    Owned x(DType::F32, {M, N}), ref(DType::I32, {M});
    testing::fill_small_ints(x, 28, 3);  // many ties
    OnDevice dx(x), dout(DType::I32, {M});
    argmax(dx.t(), dout.t());
    reference::argmax(x.t(), ref.t());
    ASSERT_TRUE(testing::bitwise_equal(dout.to_host().t(), ref.t())) << "N=" << N;
    // Random reals: a unique maximum anywhere in the row.
    testing::fill_uniform(x, 29, -5.0f, 5.0f);
    OnDevice dx2(x);
    argmax(dx2.t(), dout.t());
    reference::argmax(x.t(), ref.t());
    ASSERT_TRUE(testing::bitwise_equal(dout.to_host().t(), ref.t())) << "N=" << N;
  }
  Owned x(DType::F32, {2, 5});
  const float rows[2][5] = {{1.0f, 7.0f, NAN, 9.0f, NAN}, {-0.0f, 0.0f, -1.0f, 0.0f, -0.0f}};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 5; ++c) x.p<float>()[r * 5 + c] = rows[r][c];
  OnDevice dx(x), dout(DType::I32, {2});
  argmax(dx.t(), dout.t());
  const Owned out = dout.to_host();
  EXPECT_EQ(out.p<int32_t>()[0], 2);  // the first NaN, as torch.argmax
  EXPECT_EQ(out.p<int32_t>()[1], 0);  // -0 and +0 tie: the lowest index
  // NaNs and tied maxima in different chunks of a long row (the kernel reduces chunks apart).
  Owned y(DType::F32, {2, 10000});
  testing::fill_uniform(y, 30, -5.0f, 5.0f);
  y.p<float>()[7000] = NAN;
  y.p<float>()[3000] = NAN;
  y.p<float>()[10000 + 9000] = 50.0f;
  y.p<float>()[10000 + 4100] = 50.0f;
  OnDevice dy(y), dyout(DType::I32, {2});
  argmax(dy.t(), dyout.t());
  const Owned yout = dyout.to_host();
  EXPECT_EQ(yout.p<int32_t>()[0], 3000);
  EXPECT_EQ(yout.p<int32_t>()[1], 4100);
}

TEST(CudaSoftcap, MatchesReference) {
  RINGLM_REQUIRE_GPU();
  for (int64_t N : kRowLengths) {
    for (float cap : {30.0f, 1.5f}) {
      Owned x(DType::F32, {2, N});
      testing::fill_uniform(x, 29, -100.0f, 100.0f);
      Owned ref = copy_of(x);
      OnDevice dx(x);
      softcap(dx.t(), cap);
      reference::softcap(ref.t(), cap);
      // x / cap (u, through tanh's relative condition number ≤ 1), tanhf (≤ 4u), · cap (u).
      const Owned out = dx.to_host();
      for (int64_t i = 0; i < 2 * N; ++i)
        ASSERT_NEAR(out.f(i), ref.f(i), 8 * kEps * std::fabs(ref.f(i)) + 1e-37)
            << "N=" << N << " cap=" << cap;
    }
  }
}

// A row's bits do not depend on how many rows run with it (fixed reduction order per row).
TEST(CudaRowOps, BatchInvariant) {
  RINGLM_REQUIRE_GPU();
  const int64_t M = 9, H = 4099;
  Owned x(DType::F32, {M, H}), w(DType::BF16, {H}), u(DType::F32, {M, H});
  testing::fill_uniform(x, 30, -4.0f, 4.0f);
  testing::fill_uniform(w, 31);
  testing::fill_uniform(u, 32);
  OnDevice dx(x), dw(w), du(u), batched(DType::F32, {M, H}), idx(DType::I32, {M});
  auto run_all = [&](const Tensor& xs, const Tensor& us, Tensor out, Tensor am) {
    rms_norm(xs, dw.t(), RmsNormConfig{}, out);
    gated_activation(out, us, Activation::GeluTanh, out);
    softmax(out);
    argmax(out, am);
  };
  run_all(dx.t(), du.t(), batched.t(), idx.t());
  const Owned all = batched.to_host(), all_idx = idx.to_host();
  for (int64_t m = 0; m < M; ++m) {
    OnDevice alone(DType::F32, {1, H}), alone_idx(DType::I32, {1});
    run_all(dx.t().slice_rows(m, m + 1), du.t().slice_rows(m, m + 1), alone.t(), alone_idx.t());
    ASSERT_TRUE(testing::bitwise_equal(alone.to_host().t(), all.t().slice_rows(m, m + 1))) << m;
    ASSERT_EQ(alone_idx.to_host().p<int32_t>()[0], all_idx.p<int32_t>()[m]) << m;
  }
}

}  // namespace
}  // namespace ringlm::ops
