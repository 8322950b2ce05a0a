// GPU rope and kv_write vs the scalar references, and their device-side value checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::copy_of;
using testing::kEps;
using testing::OnDevice;
using testing::Owned;

TEST(CudaRope, MatchesReference) {
  RINGLM_REQUIRE_GPU();
  struct Case {
    int64_t T, heads, head_dim;
    int rotary_dim;
    float scaling;
  };
  // Full and partial rotary, odd head counts, YaRN-like scaling, head_dim up to 512.
  const Case cases[] = {{1, 1, 2, 2, 1.0f},     {7, 3, 64, 64, 1.0f}, {5, 8, 128, 128, 1.2f},
                        {3, 2, 256, 256, 1.0f}, {9, 5, 80, 40, 0.9f}, {4, 4, 512, 512, 1.0f},
                        {33, 1, 96, 32, 1.0f}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "T=" << c.T << " heads=" << c.heads << " D=" << c.head_dim
                                      << " rot=" << c.rotary_dim);
    const RopeTable table = testing::make_rope_table(c.rotary_dim, c.scaling, 500000.0);
    Owned x(DType::F32, {c.T, c.heads, c.head_dim}), pos(DType::I32, {c.T});
    testing::fill_uniform(x, 40, -2.0f, 2.0f);
    std::mt19937 rng(41);
    for (int64_t t = 0; t < c.T; ++t)
      pos.p<int32_t>()[t] = t == 0 ? 0 : static_cast<int32_t>(rng() % 200000);
    Owned ref = copy_of(x);
    OnDevice dx(x), dpos(pos);
    rope(dx.t(), dpos.t(), table);
    reference::rope(ref.t(), pos.t(), table);
    const Owned out = dx.to_host();
    // cosf/sinf of the same f32 angle are within 4u (2 ulp), times scaling (u); each output is
    // x1·c ∓ x2·s: ≤ 7u·(|x1·c| + |x2·s|) with the products and the sum. Unrotated dims: exact.
    const int64_t half = c.rotary_dim / 2;
    for (int64_t t = 0; t < c.T; ++t) {
      const double angle_base = static_cast<float>(pos.p<int32_t>()[t]);
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t o = (t * c.heads + h) * c.head_dim;
        for (int64_t d = 0; d < c.head_dim; ++d) {
          if (d >= c.rotary_dim) {
            ASSERT_EQ(out.f(o + d), x.f(o + d));
            continue;
          }
          const int64_t i = d % half;
          const double angle =
              static_cast<float>(angle_base * table.inv_freq[static_cast<size_t>(i)]);
          // First half: x1·c − x2·s; second half: x2·c + x1·s.
          const double a = x.f(o + (d < half ? i : i + half));
          const double b = x.f(o + (d < half ? i + half : i));
          const double mag =
              (std::fabs(a * std::cos(angle)) + std::fabs(b * std::sin(angle))) * c.scaling;
          ASSERT_NEAR(out.f(o + d), ref.f(o + d), 8 * kEps * mag + 1e-37)
              << "t=" << t << " h=" << h << " d=" << d;
        }
      }
    }
  }
}

TEST(CudaRope, NegativePositionIsReportedBySynchronize) {
  RINGLM_REQUIRE_GPU();
  Owned x(DType::F32, {2, 1, 4}), pos(DType::I32, {2});
  testing::fill_uniform(x, 42);
  pos.p<int32_t>()[0] = 3;
  pos.p<int32_t>()[1] = -7;
  OnDevice dx(x), dpos(pos);
  rope(dx.t(), dpos.t(), testing::make_rope_table(4, 1.0f, 10000.0));
  testing::expect_sync_error("position -7 at index 1");
  const Owned out = dx.to_host();
  for (int d = 0; d < 4; ++d) EXPECT_EQ(out.f(4 + d), x.f(4 + d));  // left as it was
}

TEST(CudaKvWrite, MatchesReferenceExactly) {
  RINGLM_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (auto [kvh, D] : {std::pair<int64_t, int64_t>{1, 5}, {2, 64}, {8, 128}, {4, 256}}) {
      SCOPED_TRACE(::testing::Message()
                   << testing::dtype_label(dt) << " kvh=" << kvh << " D=" << D);
      const int64_t blocks = 6, bt = 5, T = 11;
      Owned cache_k(dt, {blocks, bt, kvh, D}), cache_v(dt, {blocks, bt, kvh, D});
      testing::fill_uniform(cache_k, 43);
      testing::fill_uniform(cache_v, 44);
      Owned k(DType::F32, {T, kvh, D}), v(DType::F32, {T, kvh, D}), slots(DType::I32, {T});
      testing::fill_uniform(k, 45, -3.0f, 3.0f);
      testing::fill_uniform(v, 46, -3.0f, 3.0f);
      std::vector<int32_t> perm(blocks * bt);
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
      std::shuffle(perm.begin(), perm.end(), std::mt19937(47));
      for (int64_t t = 0; t < T; ++t) slots.p<int32_t>()[t] = perm[static_cast<size_t>(t)];
      OnDevice dck(cache_k), dcv(cache_v), dk(k), dv(v), ds(slots);
      KvLayerView dview{dck.t(), dcv.t()}, view{cache_k.t(), cache_v.t()};
      kv_write(dk.t(), dv.t(), ds.t(), dview);
      reference::kv_write(k.t(), v.t(), slots.t(), view);
      ASSERT_TRUE(testing::bitwise_equal(dck.to_host().t(), cache_k.t()));
      ASSERT_TRUE(testing::bitwise_equal(dcv.to_host().t(), cache_v.t()));
    }
  }
}

TEST(CudaKvWrite, BadSlotIsReportedBySynchronize) {
  RINGLM_REQUIRE_GPU();
  Owned cache(DType::BF16, {2, 4, 1, 8}), k(DType::F32, {2, 1, 8}), slots(DType::I32, {2});
  testing::fill_uniform(cache, 48);
  testing::fill_uniform(k, 49);
  slots.p<int32_t>()[0] = 1;
  slots.p<int32_t>()[1] = 8;  // capacity is 2 · 4 = 8
  OnDevice dck(cache), dcv(cache), dk(k), ds(slots);
  KvLayerView view{dck.t(), dcv.t()};
  kv_write(dk.t(), dk.t(), ds.t(), view);
  testing::expect_sync_error("slot 8 of token 1");
}

}  // namespace
}  // namespace ringlm::ops
