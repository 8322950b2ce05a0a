// Row-wise ops vs the scalar references on every SIMD target: embedding, rms_norm, add_inplace
// (and add_rms_norm against the two),
// gated activations, softmax, argmax, softcap. Odd row lengths exercise the vector tails.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::for_each_simd_target;
using testing::kEps;
using testing::Owned;

const int64_t kRowLengths[] = {1, 3, 17, 64, 257, 1023};
const int64_t kRowCounts[] = {1, 2, 7};

// Copy of a tensor (for in-place ops: one copy for the op, one for the reference).
Owned copy_of(const Owned& src, std::initializer_list<int64_t> dims) {
  Owned out(src.t().dtype, dims);
  std::memcpy(out.t().data, src.t().data, src.t().nbytes());
  return out;
}

TEST(Embedding, MatchesReferenceExactly) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (float scale : {1.0f, 8.0f, 0.3f}) {
      const int64_t V = 11, H = 37, M = 9;
      Owned table(dt, {V, H}), ids(DType::I32, {M});
      testing::fill_uniform(table, 20);
      for (int64_t m = 0; m < M; ++m) ids.p<int32_t>()[m] = static_cast<int32_t>((m * 7 + 3) % V);
      Owned out(DType::F32, {M, H}), ref(DType::F32, {M, H});
      embedding(ids.t(), table.t(), scale, out.t());
      reference::embedding(ids.t(), table.t(), scale, ref.t());
      // Exact: widening is exact and the scale is one f32 multiply in both.
      EXPECT_TRUE(testing::bitwise_equal(out.t(), ref.t())) << testing::dtype_label(dt);
    }
  }
}

TEST(RmsNorm, MatchesReference) {
  for_each_simd_target([](const std::string&) {
    for (DType wt : {DType::F32, DType::BF16, DType::F16}) {
      for (bool unit_offset : {false, true}) {
        for (int64_t H : kRowLengths) {
          for (int64_t M : kRowCounts) {
            SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " H=" << H
                                              << " M=" << M << " unit_offset=" << unit_offset);
            Owned x(DType::F32, {M, H}), w(wt, {H});
            testing::fill_uniform(x, 21, -3.0f, 3.0f);
            testing::fill_uniform(w, 22);
            Owned out(DType::F32, {M, H}), ref(DType::F32, {M, H});
            const RmsNormConfig cfg{1e-5f, unit_offset};
            rms_norm(x.t(), w.t(), cfg, out.t());
            reference::rms_norm(x.t(), w.t(), cfg, ref.t());
            // Tolerance: the f32 sum of H squares is within (H + 2)·u relative; mean, +eps,
            // sqrt and 1/x add ~3u; rsqrt halves the sum's error; two products add 2u.
            const double rel = ((static_cast<double>(H) + 2) / 2 + 6) * kEps;
            for (int64_t i = 0; i < M * H; ++i)
              ASSERT_NEAR(out.f(i), ref.f(i), rel * std::fabs(ref.f(i)) + 1e-30) << "i=" << i;
            // In place (out aliases x) gives the same bits.
            Owned inplace = copy_of(x, {M, H});
            rms_norm(inplace.t(), w.t(), cfg, inplace.t());
            ASSERT_TRUE(testing::bitwise_equal(inplace.t(), out.t()));
          }
        }
      }
    }
  });
}

// add_rms_norm = add_inplace then rms_norm, bit for bit: out separate, out aliasing the residual
// (the decoder's use), out aliasing x, and x rows strided inside a wider buffer.
TEST(AddRmsNorm, EqualsAddThenNormBitwise) {
  for_each_simd_target([](const std::string&) {
    for (DType wt : {DType::F32, DType::BF16}) {
      for (bool unit_offset : {false, true}) {
        for (int64_t H : kRowLengths) {
          for (int64_t M : kRowCounts) {
            SCOPED_TRACE(::testing::Message() << testing::dtype_label(wt) << " H=" << H
                                              << " M=" << M << " unit_offset=" << unit_offset);
            Owned x(DType::F32, {M, H}), r(DType::F32, {M, H}), w(wt, {H});
            testing::fill_uniform(x, 31, -3.0f, 3.0f);
            testing::fill_uniform(r, 32, -3.0f, 3.0f);
            testing::fill_uniform(w, 33);
            const RmsNormConfig cfg{1e-5f, unit_offset};
            Owned want_x = copy_of(x, {M, H}), want(DType::F32, {M, H});
            add_inplace(want_x.t(), r.t());
            rms_norm(want_x.t(), w.t(), cfg, want.t());

            Owned got_x = copy_of(x, {M, H}), got(DType::F32, {M, H});
            add_rms_norm(got_x.t(), r.t(), w.t(), cfg, got.t());
            ASSERT_TRUE(testing::bitwise_equal(got_x.t(), want_x.t()));
            ASSERT_TRUE(testing::bitwise_equal(got.t(), want.t()));

            Owned alias_x = copy_of(x, {M, H}), alias_r = copy_of(r, {M, H});
            add_rms_norm(alias_x.t(), alias_r.t(), w.t(), cfg, alias_r.t());  // out = residual
            ASSERT_TRUE(testing::bitwise_equal(alias_x.t(), want_x.t()));
            ASSERT_TRUE(testing::bitwise_equal(alias_r.t(), want.t()));

            Owned inplace = copy_of(x, {M, H});
            add_rms_norm(inplace.t(), r.t(), w.t(), cfg, inplace.t());  // out = x
            ASSERT_TRUE(testing::bitwise_equal(inplace.t(), want.t()));

            // x as rows of width H inside a [M, H + 5] buffer.
            Owned wide(DType::F32, {M, H + 5});
            for (int64_t m = 0; m < M; ++m)
              for (int64_t h = 0; h < H; ++h) wide.set(m * (H + 5) + h, x.f(m * H + h));
            Tensor rows = wide.t();
            rows.shape[1] = H;  // rows H + 5 apart
            Owned strided_out(DType::F32, {M, H});
            add_rms_norm(rows, r.t(), w.t(), cfg, strided_out.t());
            ASSERT_TRUE(testing::bitwise_equal(strided_out.t(), want.t()));
          }
        }
      }
    }
  });
}

TEST(AddInplace, MatchesReferenceExactly) {
  for_each_simd_target([](const std::string&) {
    for (int64_t H : kRowLengths) {
      Owned x(DType::F32, {3, H}), y(DType::F32, {3, H});
      testing::fill_uniform(x, 23);
      testing::fill_uniform(y, 24);
      Owned ref = copy_of(x, {3, H});
      add_inplace(x.t(), y.t());
      reference::add_inplace(ref.t(), y.t());
      ASSERT_TRUE(testing::bitwise_equal(x.t(), ref.t())) << "H=" << H;
    }
  });
}

TEST(GatedActivation, MatchesReference) {
  for_each_simd_target([](const std::string&) {
    for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
      for (int64_t I : kRowLengths) {
        SCOPED_TRACE(::testing::Message() << "act=" << static_cast<int>(act) << " I=" << I);
        const int64_t M = 3;
        Owned g(DType::F32, {M, I}), u(DType::F32, {M, I});
        testing::fill_uniform(g, 25, -12.0f, 12.0f);
        testing::fill_uniform(u, 26, -2.0f, 2.0f);
        Owned out(DType::F32, {M, I}), ref(DType::F32, {M, I});
        gated_activation(g.t(), u.t(), act, out.t());
        reference::gated_activation(g.t(), u.t(), act, ref.t());
        for (int64_t i = 0; i < M * I; ++i) {
          const double gv = g.f(i), uv = u.f(i);
          double tol;
          if (act == Activation::SiLU) {
            // exp (≤ 1 ulp), 1 + e, g / (...), · up: ≤ 6u relative.
            tol = 6 * kEps * std::fabs(ref.f(i));
          } else {
            // tanh is ≤ 4 ulp of its value and its f32 argument carries ~4u·|inner|; 1 + tanh
            // cancels as tanh → -1, so bound the absolute error of (1 + tanh) and scale by ½|g·u|.
            const double inner = 0.7978845608028654 * (gv + 0.044715 * gv * gv * gv);
            tol = 0.5 * std::fabs(gv * uv) * (10 + 4 * std::fabs(inner)) * kEps +
                  4 * kEps * std::fabs(ref.f(i));
          }
          ASSERT_NEAR(out.f(i), ref.f(i), tol + 1e-37) << "g=" << gv << " u=" << uv;
        }
        // In place (out aliases gate).
        Owned inplace = copy_of(g, {M, I});
        gated_activation(inplace.t(), u.t(), act, inplace.t());
        ASSERT_TRUE(testing::bitwise_equal(inplace.t(), out.t()));
      }
    }
  });
}

TEST(GatedActivation, ExtremeGates) {
  // SiLU of very negative gates is -0 (exp overflows, as torch); of very positive gates is g.
  Owned g(DType::F32, {1, 4}), u(DType::F32, {1, 4}), out(DType::F32, {1, 4});
  const float gates[] = {-200.0f, -90.0f, 90.0f, 200.0f};
  for (int i = 0; i < 4; ++i) {
    g.p<float>()[i] = gates[i];
    u.p<float>()[i] = 1.0f;
  }
  gated_activation(g.t(), u.t(), Activation::SiLU, out.t());
  EXPECT_EQ(out.f(0), 0.0f);
  EXPECT_NEAR(out.f(1), 0.0f, 1e-36);
  EXPECT_EQ(out.f(2), 90.0f);
  EXPECT_EQ(out.f(3), 200.0f);
  gated_activation(g.t(), u.t(), Activation::GeluTanh, out.t());
  EXPECT_EQ(out.f(0), 0.0f);
  EXPECT_EQ(out.f(3), 200.0f);
}

TEST(Softmax, MatchesReference) {
  for_each_simd_target([](const std::string&) {
    for (int64_t N : kRowLengths) {
      for (int64_t M : kRowCounts) {
        SCOPED_TRACE(::testing::Message() << "N=" << N << " M=" << M);
        Owned x(DType::F32, {M, N});
        testing::fill_uniform(x, 27, -8.0f, 8.0f);
        Owned ref = copy_of(x, {M, N});
        softmax(x.t());
        reference::softmax(ref.t());
        // e_i carries exp's 1 ulp plus the rounding of x - max (≤ u·|x - max| ≤ 16u here);
        // the f32 sum of N terms adds ≤ (N + 1)u relative; the division 1u.
        const double rel = (static_cast<double>(N) + 20) * kEps;
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_NEAR(x.f(i), ref.f(i), rel * std::fabs(ref.f(i)) + 1e-37) << "i=" << i;
      }
    }
  });
}

TEST(Softmax, InfinitiesAndNaN) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  Owned x(DType::F32, {3, 5});
  const float rows[3][5] = {{1.0f, -kInf, 2.0f, -kInf, 0.5f},
                            {-kInf, -kInf, -kInf, -kInf, -kInf},
                            {1.0f, NAN, 0.0f, 2.0f, 3.0f}};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) x.p<float>()[r * 5 + c] = rows[r][c];
  Owned ref = copy_of(x, {3, 5});
  softmax(x.t());
  reference::softmax(ref.t());
  EXPECT_EQ(x.f(1), 0.0f);  // masked entries get exactly 0
  EXPECT_EQ(x.f(3), 0.0f);
  for (int c : {0, 2, 4}) EXPECT_NEAR(x.f(c), ref.f(c), 1e-6);
  for (int c = 0; c < 5; ++c) EXPECT_TRUE(std::isnan(x.f(5 + c)));   // all -inf: NaN (0/0)
  for (int c = 0; c < 5; ++c) EXPECT_TRUE(std::isnan(x.f(10 + c)));  // any NaN: all NaN
}

TEST(Argmax, MatchesReferenceWithTiesAndNaN) {
  for (int64_t N : kRowLengths) {
    const int64_t M = 4;
    Owned x(DType::F32, {M, N}), out(DType::I32, {M}), ref(DType::I32, {M});
    testing::fill_small_ints(x, 28, 3);  // many ties
    argmax(x.t(), out.t());
    reference::argmax(x.t(), ref.t());
    ASSERT_TRUE(testing::bitwise_equal(out.t(), ref.t())) << "N=" << N;
    // Ties go to the lowest index.
    for (int64_t m = 0; m < M; ++m) {
      const int32_t a = out.p<int32_t>()[m];
      for (int64_t n = 0; n < a; ++n) ASSERT_LT(x.f(m * N + n), x.f(m * N + a));
    }
  }
  Owned x(DType::F32, {1, 5}), out(DType::I32, {1});
  const float row[5] = {1.0f, 7.0f, NAN, 9.0f, NAN};
  for (int c = 0; c < 5; ++c) x.p<float>()[c] = row[c];
  argmax(x.t(), out.t());
  EXPECT_EQ(out.p<int32_t>()[0], 2);  // the first NaN, as torch.argmax
}

TEST(Softcap, MatchesReference) {
  for_each_simd_target([](const std::string&) {
    for (int64_t N : kRowLengths) {
      for (float cap : {30.0f, 1.5f}) {
        Owned x(DType::F32, {2, N});
        testing::fill_uniform(x, 29, -100.0f, 100.0f);
        Owned ref = copy_of(x, {2, N});
        softcap(x.t(), cap);
        reference::softcap(ref.t(), cap);
        // x / cap (1u), tanh (≤ 4 ulp), · cap (1u).
        for (int64_t i = 0; i < 2 * N; ++i)
          ASSERT_NEAR(x.f(i), ref.f(i), 8 * kEps * std::fabs(ref.f(i)) + 1e-37)
              << "N=" << N << " cap=" << cap;
      }
    }
  });
}

// Row-wise ops give each row the same bits whatever the batch and the thread split.
TEST(RowOps, BatchInvariant) {
  const int64_t M = 9, H = 257;
  Owned x(DType::F32, {M, H}), w(DType::BF16, {H}), u(DType::F32, {M, H});
  testing::fill_uniform(x, 30, -4.0f, 4.0f);
  testing::fill_uniform(w, 31);
  testing::fill_uniform(u, 32);
  auto run_all = [&](const Tensor& xs, const Tensor& us, Owned& out) {
    rms_norm(xs, w.t(), RmsNormConfig{}, out.t());
    gated_activation(out.t(), us, Activation::GeluTanh, out.t());
    softmax(out.t());
  };
  Owned batched(DType::F32, {M, H});
  {
    testing::ScopedThreads threads(3);
    run_all(x.t(), u.t(), batched);
  }
  for (int64_t m = 0; m < M; ++m) {
    Owned alone(DType::F32, {1, H});
    run_all(x.t().slice_rows(m, m + 1), u.t().slice_rows(m, m + 1), alone);
    ASSERT_TRUE(testing::bitwise_equal(alone.t(), batched.t().slice_rows(m, m + 1))) << m;
  }
}

}  // namespace
}  // namespace ringlm::ops
