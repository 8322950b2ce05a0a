// The residual-stream matmuls on the CPU (ops/residual_matmul.h), where they run unfused: against
// the scalar references of the ops they stand for, bad arguments refused before anything is
// written, and no fusion claimed. The GPU's fused forms: tests/cuda/residual_matmul_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "ops/residual_matmul.h"
#include "ops/weight.h"

namespace ringlm::ops {
namespace {

using testing::Owned;

constexpr int64_t kM = 3, kK = 40, kN = 9;

TEST(ResidualMatmul, NormedMatmulsMatchTheReference) {
  Owned x(DType::F32, {kM, kK}), g(DType::BF16, {kK}), w(DType::BF16, {kN, kK}),
      up(DType::BF16, {kN, kK}), b(DType::F32, {kN});
  testing::fill_uniform(x, 1, -2.0f, 2.0f);
  testing::fill_uniform(g, 2);
  testing::fill_uniform(w, 3);
  testing::fill_uniform(up, 4);
  testing::fill_uniform(b, 5);
  const RmsNormConfig config{1e-5f, true};
  Owned normed(DType::F32, {kM, kK}), y(DType::F32, {kM, kN}), gy(DType::F32, {kM, kN}),
      uy(DType::F32, {kM, kN}), out(DType::F32, {kM, kN});
  const NormedRows in{&x.t(), &g.t(), config};
  const Weight ww(w.t()), wu(up.t());
  const Tensor none;
  const MatmulTarget target{&ww, &b.t(), &y.t()};
  matmul_many(in, normed.t(), std::span<const MatmulTarget>(&target, 1));
  gated_matmul(in, normed.t(), {&ww, &none, &gy.t()}, {&wu, &b.t(), &uy.t()}, Activation::SiLU,
               out.t());

  Owned ref_normed(DType::F32, {kM, kK}), ref_y(DType::F32, {kM, kN}),
      ref_gate(DType::F32, {kM, kN}), ref_up(DType::F32, {kM, kN}), ref_out(DType::F32, {kM, kN});
  reference::rms_norm(x.t(), g.t(), config, ref_normed.t());
  reference::matmul(ref_normed.t(), w.t(), b.t(), ref_y.t());
  reference::matmul(ref_normed.t(), w.t(), Tensor(), ref_gate.t());
  reference::matmul(ref_normed.t(), up.t(), b.t(), ref_up.t());
  reference::gated_activation(ref_gate.t(), ref_up.t(), Activation::SiLU, ref_out.t());
  for (int64_t i = 0; i < kM * kN; ++i) {
    EXPECT_NEAR(y.f(i), ref_y.f(i), 1e-4f * (1.0f + std::fabs(ref_y.f(i)))) << i;
    EXPECT_NEAR(out.f(i), ref_out.f(i), 1e-4f * (1.0f + std::fabs(ref_out.f(i)))) << i;
  }
  const Weight* weights[] = {&ww, &wu};
  EXPECT_FALSE(residual_fusion_applies(in, weights));  // the CPU never fuses
}

// Small integers: every product and sum is exact, so acc + x·wᵀ + bias matches bit for bit.
TEST(ResidualMatmul, AccumulateAddsTheProduct) {
  Owned x(DType::F32, {kM, kK}), w(DType::BF16, {kN, kK}), b(DType::BF16, {kN}),
      acc(DType::F32, {kM, kN}), scratch(DType::F32, {kM, kN}), want(DType::F32, {kM, kN});
  testing::fill_small_ints(x, 6);
  testing::fill_small_ints(w, 7);
  testing::fill_small_ints(b, 8, 50);
  testing::fill_small_ints(acc, 9, 1000);
  reference::matmul(x.t(), w.t(), b.t(), want.t());
  reference::add_inplace(want.t(), acc.t());
  matmul_accumulate(x.t(), Weight(w.t()), b.t(), scratch.t(), acc.t());
  EXPECT_TRUE(testing::bitwise_equal(acc.t(), want.t()));
}

// A norm weight of the wrong length is refused before the norm or a matmul writes anything.
TEST(ResidualMatmul, BadNormWeightChangesNothing) {
  Owned x(DType::F32, {kM, kK}), g(DType::F32, {kK + 1}), w(DType::F32, {kN, kK}),
      normed(DType::F32, {kM, kK}), y(DType::F32, {kM, kN});
  testing::fill_uniform(x, 10);
  testing::fill_uniform(g, 11);
  testing::fill_uniform(w, 12);
  testing::fill_uniform(normed, 13);
  testing::fill_uniform(y, 14);
  Owned normed_before(DType::F32, {kM, kK}), y_before(DType::F32, {kM, kN});
  std::memcpy(normed_before.t().data, normed.t().data, normed.t().nbytes());
  std::memcpy(y_before.t().data, y.t().data, y.t().nbytes());
  const Weight ww(w.t());
  const Tensor none;
  const MatmulTarget target{&ww, &none, &y.t()};
  try {
    matmul_many(NormedRows{&x.t(), &g.t(), {}}, normed.t(),
                std::span<const MatmulTarget>(&target, 1));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(testing::bitwise_equal(normed.t(), normed_before.t()));
  EXPECT_TRUE(testing::bitwise_equal(y.t(), y_before.t()));
}

}  // namespace
}  // namespace ringlm::ops
