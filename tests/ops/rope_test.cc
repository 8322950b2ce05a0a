// rope vs the scalar reference, and the rope tables of each rope_type against the formulas of
// transformers' ROPE_INIT_FUNCTIONS evaluated independently in double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "ops/rope_config.h"

namespace ringlm::ops {
namespace {

using testing::kEps;
using testing::Owned;

RopeTable default_table(int rotary_dim, double theta = 10000.0) {
  io::RopeScaling rope;
  rope.rope_theta = theta;
  return make_rope_table(rope, rotary_dim, 4096);
}

TEST(Rope, MatchesReference) {
  for (int64_t head_dim : {int64_t{16}, int64_t{64}, int64_t{80}, int64_t{128}}) {
    for (bool partial : {false, true}) {
      for (float scaling : {1.0f, 1.1386f}) {
        SCOPED_TRACE(::testing::Message() << "head_dim=" << head_dim << " partial=" << partial
                                          << " scaling=" << scaling);
        RopeTable table =
            default_table(partial ? static_cast<int>(head_dim / 2) : static_cast<int>(head_dim));
        table.attention_scaling = scaling;
        const int64_t T = 5, heads = 3;
        Owned x(DType::F32, {T, heads, head_dim}), pos(DType::I32, {T});
        testing::fill_uniform(x, 40);
        const int32_t positions[T] = {0, 1, 17, 4095, 100000};
        for (int64_t t = 0; t < T; ++t) pos.p<int32_t>()[t] = positions[t];
        Owned ref(DType::F32, {T, heads, head_dim});
        std::memcpy(ref.t().data, x.t().data, x.t().nbytes());
        rope(x.t(), pos.t(), table);
        reference::rope(ref.t(), pos.t(), table);
        // Both use the same f32 angle; cos/sin in f32 (≤ 1 ulp, · scaling 1u), two products
        // and a sum: ≤ 4u · scaling · (|x1| + |x2|) <= 8u · scaling for inputs in [-1, 1].
        for (int64_t t = 0; t < T; ++t) {
          for (int64_t h = 0; h < heads; ++h) {
            for (int64_t d = 0; d < head_dim; ++d) {
              const int64_t i = (t * heads + h) * head_dim + d;
              if (d >= table.rotary_dim) {  // untouched beyond rotary_dim
                ASSERT_EQ(x.f(i), ref.f(i));
                continue;
              }
              ASSERT_NEAR(x.f(i), ref.f(i), 8 * kEps * scaling) << "t=" << t << " d=" << d;
            }
          }
        }
      }
    }
  }
}

// Position 0 is the identity (cos 0 = 1, sin 0 = 0) when attention_scaling is 1.
TEST(Rope, PositionZeroIsIdentity) {
  const RopeTable table = default_table(32);
  Owned x(DType::F32, {1, 2, 32}), pos(DType::I32, {1});
  testing::fill_uniform(x, 41);
  Owned before(DType::F32, {1, 2, 32});
  std::memcpy(before.t().data, x.t().data, x.t().nbytes());
  pos.p<int32_t>()[0] = 0;
  rope(x.t(), pos.t(), table);
  EXPECT_TRUE(testing::bitwise_equal(x.t(), before.t()));
}

// ---- Tables (transformers' rope init functions, recomputed here in double) ----

double default_inv_freq(double theta, int dim, int i) {
  return 1.0 / std::pow(theta, 2.0 * i / dim);
}

TEST(RopeTable, Default) {
  const RopeTable t = default_table(128, 500000.0);
  ASSERT_EQ(t.rotary_dim, 128);
  ASSERT_EQ(t.inv_freq.size(), 64u);
  EXPECT_EQ(t.attention_scaling, 1.0f);
  for (int i = 0; i < 64; ++i)  // f32 pow and 1/x: a few ulp
    EXPECT_NEAR(t.inv_freq[static_cast<size_t>(i)], default_inv_freq(500000.0, 128, i),
                4 * kEps * default_inv_freq(500000.0, 128, i));
}

TEST(RopeTable, PartialRotary) {
  io::RopeScaling rope;
  rope.partial_rotary_factor = 0.25;
  const RopeTable t = make_rope_table(rope, 80, 4096);
  EXPECT_EQ(t.rotary_dim, 20);
  ASSERT_EQ(t.inv_freq.size(), 10u);
  EXPECT_NEAR(t.inv_freq[1], default_inv_freq(10000.0, 20, 1), 1e-7);
}

TEST(RopeTable, LinearDividesByFactor) {
  io::RopeScaling rope;
  rope.rope_type = "linear";
  rope.factor = 2.0;
  const RopeTable t = make_rope_table(rope, 32, 512);
  const RopeTable d = default_table(32);
  for (size_t i = 0; i < t.inv_freq.size(); ++i) EXPECT_EQ(t.inv_freq[i], d.inv_freq[i] / 2.0f);
}

TEST(RopeTable, Llama3) {
  io::RopeScaling rope;
  rope.rope_type = "llama3";
  rope.rope_theta = 500000.0;
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_position_embeddings = 64;
  const int dim = 16;
  const RopeTable t = make_rope_table(rope, dim, 1024);
  int high = 0, low = 0, medium = 0;
  for (int i = 0; i < dim / 2; ++i) {
    const double f = default_inv_freq(500000.0, dim, i);
    const double wavelen = 2 * std::numbers::pi / f;
    const double low_wavelen = 64.0 / 1.0, high_wavelen = 64.0 / 4.0;
    double want;
    if (wavelen < high_wavelen) {
      want = f, ++high;
    } else if (wavelen > low_wavelen) {
      want = f / 8.0, ++low;
    } else {
      const double smooth = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = (1 - smooth) * f / 8.0 + smooth * f, ++medium;
    }
    EXPECT_NEAR(t.inv_freq[static_cast<size_t>(i)], want, 16 * kEps * want) << "i=" << i;
  }
  // The chosen config exercises all three bands.
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(medium, 0);
}

TEST(RopeTable, Yarn) {
  io::RopeScaling rope;
  rope.rope_type = "yarn";
  rope.rope_theta = 10000.0;
  rope.factor = 4.0;
  rope.original_max_position_embeddings = 64;
  const int dim = 16;
  const RopeTable t = make_rope_table(rope, dim, 512);
  EXPECT_FLOAT_EQ(t.attention_scaling, static_cast<float>(0.1 * std::log(4.0) + 1.0));
  auto correction_dim = [&](double rot) {
    return dim * std::log(64.0 / (rot * 2 * std::numbers::pi)) / (2 * std::log(10000.0));
  };
  const double lo = std::max(std::floor(correction_dim(32.0)), 0.0);
  const double hi = std::min(std::ceil(correction_dim(1.0)), dim - 1.0);
  for (int i = 0; i < dim / 2; ++i) {
    const double pos_freq = std::pow(10000.0, 2.0 * i / dim);
    const double ramp = std::clamp((i - lo) / (hi - lo), 0.0, 1.0);
    const double extra = 1 - ramp;
    const double want = 1 / (4.0 * pos_freq) * (1 - extra) + 1 / pos_freq * extra;
    EXPECT_NEAR(t.inv_freq[static_cast<size_t>(i)], want, 16 * kEps * want) << "i=" << i;
  }
  // mscale / mscale_all_dim (DeepSeek style) and an explicit attention_factor.
  rope.mscale = 1.0;
  rope.mscale_all_dim = 0.707;
  const double m = (0.1 * std::log(4.0) + 1.0) / (0.1 * 0.707 * std::log(4.0) + 1.0);
  EXPECT_FLOAT_EQ(make_rope_table(rope, dim, 512).attention_scaling, static_cast<float>(m));
  rope.attention_factor = 0.5;
  EXPECT_EQ(make_rope_table(rope, dim, 512).attention_scaling, 0.5f);
}

TEST(RopeTable, UnsupportedTypeIsAnError) {
  io::RopeScaling rope;
  rope.rope_type = "longrope";
  try {
    make_rope_table(rope, 64, 4096);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("longrope"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("llama3"), std::string::npos);  // lists supported ones
  }
  io::RopeScaling llama3;
  llama3.rope_type = "llama3";  // missing original_max_position_embeddings
  EXPECT_THROW(make_rope_table(llama3, 64, 4096), Error);
}

}  // namespace
}  // namespace ringlm::ops
