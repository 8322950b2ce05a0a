// Attention and kv_write over affine (MLX int8 / int4) KV views. Oracles: kv_write's codes and
// scales against the codec (kv/affine_codec.h) and the reference doc's worked example; the paged
// kernel against the dense reference (explicit causal + window + sink mask over the dequantized
// K/V) for every format × window × sinks × GQA ratio × head dim on every SIMD target; batch
// invariance (a row alone = the row in a batch, bitwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include "attention_check.h"
#include "kv/affine_codec.h"
#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::kEps;
using testing::KvWriteInput;
using testing::Owned;
using testing::RowSpec;

struct Format {
  int bits;
  int group;
};
const Format kFormats[] = {{8, 32}, {8, 64}, {4, 32}, {4, 64}};

// An affine paged view that owns its planes.
struct AffineCache {
  Owned k, v, ks, kb, vs, vb;
  int bits, group;
  AffineCache(Format f, int64_t blocks, int64_t bt, int64_t kvh, int64_t D)
      : k(DType::U32, {blocks, bt, kvh, D * f.bits / 32}),
        v(DType::U32, {blocks, bt, kvh, D * f.bits / 32}),
        ks(DType::BF16, {blocks, bt, kvh, D / f.group}),
        kb(DType::BF16, {blocks, bt, kvh, D / f.group}),
        vs(DType::BF16, {blocks, bt, kvh, D / f.group}),
        vb(DType::BF16, {blocks, bt, kvh, D / f.group}),
        bits(f.bits),
        group(f.group) {
    // Unwritten slots dequantize to NaN (NaN scales): reading one poisons the output.
    for (Owned* p : {&ks, &kb, &vs, &vb})
      for (int64_t i = 0; i < p->t().numel(); ++i) p->set(i, NAN);
  }
  KvLayerView view() const {
    KvLayerView kv;
    kv.k = k.t();
    kv.v = v.t();
    kv.k_scales = ks.t();
    kv.k_biases = kb.t();
    kv.v_scales = vs.t();
    kv.v_biases = vb.t();
    kv.bits = bits;
    kv.group_size = group;
    return kv;
  }
};

// Element e of slot `slot` of K or V, dequantized as documented: scale·code + bias in f32.
float dequantized(const KvLayerView& kv, bool value, int64_t slot, int64_t e) {
  const int64_t D = kv.head_dim(), row = slot * kv.kv_heads() + e / D, i = e % D;
  const uint32_t code = kv::affine_code(
      (value ? kv.v : kv.k).ptr<const uint32_t>() + row * D * kv.bits / 32, i, kv.bits);
  const int64_t gi = row * (D / kv.group_size) + i / kv.group_size;
  const float s = bf16_to_f32((value ? kv.v_scales : kv.k_scales).ptr<const bf16_t>()[gi]);
  const float b = bf16_to_f32((value ? kv.v_biases : kv.k_biases).ptr<const bf16_t>()[gi]);
  return s * static_cast<float>(code) + b;
}

TEST(AffineKvWrite, MatchesCodecAndReferenceExactly) {
  for (Format f : kFormats) {
    for (int64_t D : {64, 128}) {
      const int64_t kvh = 3, T = KvWriteInput::kTokens;
      const KvWriteInput in(kvh, D, -3.0f, 5.0f);
      AffineCache cache(f, KvWriteInput::kBlocks, KvWriteInput::kBlockTokens, kvh, D),
          ref(f, KvWriteInput::kBlocks, KvWriteInput::kBlockTokens, kvh, D);
      KvLayerView view = cache.view(), ref_view = ref.view();
      kv_write(in.k.t(), in.v.t(), in.slots.t(), view);
      reference::kv_write(in.k.t(), in.v.t(), in.slots.t(), ref_view);
      for (auto [a, b] : {std::pair{&cache.k, &ref.k},
                          {&cache.v, &ref.v},
                          {&cache.ks, &ref.ks},
                          {&cache.kb, &ref.kb},
                          {&cache.vs, &ref.vs},
                          {&cache.vb, &ref.vb}}) {
        // NaN-filled planes compare bitwise too (same NaN bits in both).
        EXPECT_TRUE(testing::bitwise_equal(a->t(), b->t())) << f.bits << "-bit g" << f.group;
      }
      // Token 2's K row of head 1 is the codec's quantization of that row, scales in bf16.
      const kv::AffineFormat af{f.bits, f.group};
      std::vector<uint32_t> codes(static_cast<size_t>(D * f.bits / 32));
      std::vector<float> scales(static_cast<size_t>(D / f.group)), biases(scales.size());
      kv::affine_quantize(in.k.p<float>() + (2 * kvh + 1) * D, D, af, codes.data(), scales.data(),
                          biases.data());
      const int64_t row = KvWriteInput::kSlots[2] * kvh + 1;
      EXPECT_EQ(std::memcmp(codes.data(), cache.k.p<uint32_t>() + row * D * f.bits / 32,
                            codes.size() * 4),
                0);
      for (size_t g = 0; g < scales.size(); ++g) {
        EXPECT_EQ(cache.ks.p<bf16_t>()[row * (D / f.group) + static_cast<int64_t>(g)],
                  f32_to_bf16(scales[g]));
        EXPECT_EQ(cache.kb.p<bf16_t>()[row * (D / f.group) + static_cast<int64_t>(g)],
                  f32_to_bf16(biases[g]));
      }
      // Every dequantized value is within one step (plus the bf16 rounding of scale and bias) of
      // what was written: half a step of rounding, or, at the far end of the group, the MLX
      // algorithm's clipping — it moves the scale so that 0 is exact (s = edge / round(edge / s)),
      // which can leave the other end up to one step outside [bias, bias + n·s].
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t e = 0; e < kvh * D; ++e) {
          const int64_t slot = KvWriteInput::kSlots[t],
                        gi = (slot * kvh + e / D) * (D / f.group) + e % D / f.group;
          const double sc = std::fabs(bf16_to_f32(cache.ks.p<bf16_t>()[gi]));
          const double bi = std::fabs(bf16_to_f32(cache.kb.p<bf16_t>()[gi]));
          const double bound = sc * (1 + 1e-3) + ((1 << f.bits) * sc + bi) / 256.0;
          ASSERT_NEAR(dequantized(view, false, slot, e), in.k.p<float>()[t * kvh * D + e], bound)
              << f.bits << "-bit g" << f.group << " token " << t << " element " << e;
        }
      }
    }
  }
}

// The reference doc's 4-bit example: linspace(-1, 0.5, 32) quantizes to scale 0.1, bias -1,
// codes 0,0,1,1,2,2,3,3,... so word 0 is 0x33221100.
TEST(AffineKvWrite, WorkedExample) {
  Owned k(DType::F32, {1, 1, 32}), v(DType::F32, {1, 1, 32}), slots(DType::I32, {1});
  for (int i = 0; i < 32; ++i) {
    k.p<float>()[i] = static_cast<float>(-1.0 + i * (1.5 / 31));
    v.p<float>()[i] = 0.0f;
  }
  k.p<float>()[31] = 0.5f;
  slots.p<int32_t>()[0] = 1;
  AffineCache cache({4, 32}, 2, 1, 1, 32);
  KvLayerView view = cache.view();
  kv_write(k.t(), v.t(), slots.t(), view);
  EXPECT_EQ(cache.k.p<uint32_t>()[4], 0x33221100u);  // slot 1: words 4..7
  EXPECT_EQ(cache.ks.p<bf16_t>()[1], f32_to_bf16(0.1f));
  EXPECT_EQ(cache.kb.p<bf16_t>()[1], f32_to_bf16(-1.0f));
}

struct Config : testing::AttentionShape {
  Format format{8, 64};
};

std::string describe(const Config& c) {
  return "int" + std::to_string(c.format.bits) + "-g" + std::to_string(c.format.group) + " " +
         testing::describe_shape(c);
}

// Rows of K/V written through kv_write into an affine cache of shuffled blocks.
class AffineSetup : public testing::PagedAttentionCase {
 public:
  AffineSetup(const Config& c, const std::vector<RowSpec>& specs, uint32_t seed)
      : PagedAttentionCase(c, specs, seed),
        c_(c),
        cache_(c.format, num_blocks(), c.block_tokens, c.kv_heads, c.head_dim) {
    write_kv(cache_.view(), -2.0f, 3.0f);
  }

  KvLayerView kv() const { return cache_.view(); }

  // The dense attention tests' error bound (tests/ops/attention_test.cc), over the dequantized
  // K/V: both sides compute the same f32 dequantized values (the kernel may fuse scale·q + bias
  // into one FMA: one more rounding per element, covered by D + 3 instead of D + 2).
  double tolerance(int64_t t, int h) const {
    const int D = c_.head_dim, g = h / c_.group;
    const float* qv = query_row(t, h);
    const KvLayerView view = kv();
    double max_dot_err = 0, max_score = 0, max_v = 0;
    const std::vector<int64_t> slots = visible_slots(t);
    const int keys = static_cast<int>(slots.size());
    for (const int64_t slot : slots) {
      double mag = 0, dot = 0;
      for (int d = 0; d < D; ++d) {
        const double kd = dequantized(view, false, slot, g * D + d);
        mag += std::fabs(qv[d] * kd);
        dot += qv[d] * kd;
        max_v = std::max(max_v, double{std::fabs(dequantized(view, true, slot, g * D + d))});
      }
      max_dot_err = std::max(max_dot_err, (D + 3) * kEps * mag * params().scale);
      max_score = std::max(max_score, std::fabs(dot * params().scale));
    }
    const double delta = max_dot_err + 4 * kEps * max_score + 2 * kEps;
    return 2 * max_v * (std::expm1(2 * delta) + 2 * (keys + keys / 32 + 3) * 2 * kEps) + 1e-30;
  }

 private:
  Config c_;
  AffineCache cache_;
};

// Kernel = reference for every format × window × sinks × GQA ratio × head dim (32 and 96 are
// the small and the non-power-of-two head dims groups of 32 allow; groups of 64 need D % 64 = 0).
TEST(AffineAttention, MatchesReferenceForEveryFormat) {
  testing::for_each_simd_target([&](const std::string&) {
    uint32_t seed = 3000;
    int variant = 0;
    for (Format f : kFormats) {
      std::vector<int> dims;  // the head dims the group size divides
      for (int D : {32, 64, 96, 128, 256})
        if (D % f.group == 0) dims.push_back(D);
      ASSERT_NO_FATAL_FAILURE(
          testing::for_each_sweep_shape(dims, variant, [&](const testing::AttentionShape& shape) {
            const Config c{shape, f};
            SCOPED_TRACE(describe(c));
            AffineSetup s(c, testing::kSweepRows, seed++);
            testing::check_matches_reference(s);
          }));
    }
  });
}

// A row's output is bitwise the same alone as in the batch, under any thread split.
TEST(AffineAttention, RowAloneEqualsRowInBatch) {
  for (Format f : kFormats) {
    Config c;
    c.format = f;
    c.group = 2;
    c.window = f.bits == 4 ? 9 : 0;
    c.sinks = f.bits == 4 ? 2 : 0;
    AffineSetup s(c, testing::kMixedRows, 4000);
    ASSERT_NO_FATAL_FAILURE(testing::check_rows_alone_equal_batch(s, describe(c)));
  }
}

TEST(AffineAttention, BadViewsAreErrors) {
  Config c;
  AffineSetup s(c, {{1, 4}}, 5000);
  Owned out(DType::F32, {1, s.q_heads(), c.head_dim});
  KvLayerView kv = s.kv();
  kv.bits = 3;
  EXPECT_THROW(attention(s.q().t(), kv, s.rows(), s.params(), out.t()), Error);
  kv = s.kv();
  kv.k_scales = Tensor();
  EXPECT_THROW(attention(s.q().t(), kv, s.rows(), s.params(), out.t()), Error);
  kv = s.kv();
  kv.group_size = 32;  // scale planes have head_dim/64 groups
  EXPECT_THROW(attention(s.q().t(), kv, s.rows(), s.params(), out.t()), Error);
}

}  // namespace
}  // namespace ringlm::ops
