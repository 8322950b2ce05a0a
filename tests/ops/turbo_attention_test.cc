// Attention and kv_write over TurboQuant KV views (kv/turbo_codec.h). Oracles: kv_write's planes
// against the codec and the reference kv_write (bitwise); the paged kernel, which accumulates
// rotated values and un-rotates the output once, against the dense reference (explicit causal +
// window + sink mask over eagerly decoded, un-rotated K/V) for formats × window × sinks × GQA
// ratio × head dim on every SIMD target, within a stated f32 bound; batch invariance.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include "attention_check.h"
#include "kv/turbo_codec.h"
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
  int key_bits;
  int value_bits;
};
const Format kFormats[] = {{8, 3}, {8, 4}, {4, 3}, {2, 2}, {5, 5}, {8, 8}, {5, 2}, {4, 8}};

// A turbo paged view that owns its planes.
struct TurboCache {
  Owned k, v, ks, kz, vs;
  Format format;
  TurboCache(Format f, int64_t blocks, int64_t bt, int64_t kvh, int64_t D)
      : k(DType::U8, {blocks, bt, kvh, D * f.key_bits / 8}),
        v(DType::U8, {blocks, bt, kvh, D * f.value_bits / 8}),
        ks(DType::F16, {blocks, bt, kvh, D / 32}),
        kz(DType::F16, {blocks, bt, kvh, D / 32}),
        vs(DType::F16, {blocks, bt, kvh, D / 32}),
        format(f) {
    // Unwritten slots decode to NaN (NaN scales): reading one poisons the output.
    for (Owned* p : {&ks, &kz, &vs})
      for (int64_t i = 0; i < p->t().numel(); ++i) p->set(i, NAN);
  }
  KvLayerView view() const {
    KvLayerView kv;
    kv.k = k.t();
    kv.v = v.t();
    kv.k_scales = ks.t();
    kv.k_biases = kz.t();
    kv.v_scales = vs.t();
    kv.bits = format.key_bits;
    kv.value_bits = format.value_bits;
    kv.group_size = 32;
    return kv;
  }
};

enum class Plane { Key, Value, RotatedValue };
// Row `row` (slot · kv_heads + head) decoded by the codec. F32[head_dim].
std::vector<float> decoded(const KvLayerView& kv, Plane plane, int64_t row) {
  const int D = kv.head_dim();
  const int64_t groups = D / 32;
  std::vector<float> out(static_cast<size_t>(D));
  if (plane == Plane::Key) {
    kv::turbo_key_dequantize(kv.k.ptr<const uint8_t>() + row * D * kv.bits / 8,
                             kv.k_scales.ptr<const f16_t>() + row * groups,
                             kv.k_biases.ptr<const f16_t>() + row * groups, D, kv.bits, out.data());
    return out;
  }
  const uint8_t* codes = kv.v.ptr<const uint8_t>() + row * D * kv.value_bits / 8;
  const f16_t* scales = kv.v_scales.ptr<const f16_t>() + row * groups;
  if (plane == Plane::Value) {
    kv::turbo_value_dequantize(codes, scales, D, kv.value_bits, out.data());
  } else {
    kv::turbo_value_dequantize_rotated(codes, scales, D, kv.value_bits, out.data());
  }
  return out;
}

TEST(TurboKvWrite, MatchesCodecAndReferenceExactly) {
  for (Format f : kFormats) {
    for (int64_t D : {32, 64, 128, 256}) {
      const int64_t kvh = 3;
      const KvWriteInput in(kvh, D, -3.0f, 5.0f);
      TurboCache cache(f, KvWriteInput::kBlocks, KvWriteInput::kBlockTokens, kvh, D),
          ref(f, KvWriteInput::kBlocks, KvWriteInput::kBlockTokens, kvh, D);
      KvLayerView view = cache.view(), ref_view = ref.view();
      kv_write(in.k.t(), in.v.t(), in.slots.t(), view);
      reference::kv_write(in.k.t(), in.v.t(), in.slots.t(), ref_view);
      for (auto [a, b] : {std::pair{&cache.k, &ref.k},
                          {&cache.v, &ref.v},
                          {&cache.ks, &ref.ks},
                          {&cache.kz, &ref.kz},
                          {&cache.vs, &ref.vs}}) {
        EXPECT_TRUE(testing::bitwise_equal(a->t(), b->t()))
            << "k" << f.key_bits << "v" << f.value_bits << " D=" << D;
      }
      // Token 2's rows of head 1 are the codec's encoding of those rows.
      const int64_t row = KvWriteInput::kSlots[2] * kvh + 1, groups = D / 32;
      const int d = static_cast<int>(D);
      std::vector<uint8_t> kc(static_cast<size_t>(D * f.key_bits / 8)),
          vc(static_cast<size_t>(D * f.value_bits / 8));
      std::vector<f16_t> sc(static_cast<size_t>(groups)), zc(sc.size()), vsc(sc.size());
      kv::turbo_key_quantize(in.k.p<float>() + (2 * kvh + 1) * D, d, f.key_bits, kc.data(),
                             sc.data(), zc.data());
      kv::turbo_value_quantize(in.v.p<float>() + (2 * kvh + 1) * D, d, f.value_bits, vc.data(),
                               vsc.data());
      EXPECT_EQ(std::memcmp(kc.data(), cache.k.p<uint8_t>() + row * D * f.key_bits / 8, kc.size()),
                0);
      EXPECT_EQ(
          std::memcmp(vc.data(), cache.v.p<uint8_t>() + row * D * f.value_bits / 8, vc.size()), 0);
      EXPECT_EQ(std::memcmp(sc.data(), cache.ks.p<f16_t>() + row * groups, sc.size() * 2), 0);
      EXPECT_EQ(std::memcmp(zc.data(), cache.kz.p<f16_t>() + row * groups, zc.size() * 2), 0);
      EXPECT_EQ(std::memcmp(vsc.data(), cache.vs.p<f16_t>() + row * groups, vsc.size() * 2), 0);
    }
  }
}

struct Config : testing::AttentionShape {
  Format format{8, 3};
};

std::string describe(const Config& c) {
  return "turbo:k" + std::to_string(c.format.key_bits) + "v" + std::to_string(c.format.value_bits) +
         " " + testing::describe_shape(c);
}

// Rows of K/V written through kv_write into a turbo cache of shuffled blocks.
class TurboSetup : public testing::PagedAttentionCase {
 public:
  TurboSetup(const Config& c, const std::vector<RowSpec>& specs, uint32_t seed)
      : PagedAttentionCase(c, specs, seed),
        c_(c),
        cache_(c.format, num_blocks(), c.block_tokens, c.kv_heads, c.head_dim) {
    write_kv(cache_.view(), -2.0f, 3.0f);
  }

  KvLayerView kv() const { return cache_.view(); }

  // The dense attention tests' error bound (tests/ops/attention_test.cc) over the decoded K/V
  // (both sides decode keys to the same f32 values), with max_v the larger of the un-rotated and
  // rotated values, plus the rotations' f32 rounding: the reference un-rotates every value row,
  // the kernel the output row; a normalized FWHT of a vector bounded by A is off by at most
  // log2(D)·eps·√D·A per element (each output sums D terms over log2(D) levels), once per side.
  double tolerance(int64_t t, int h) const {
    const int D = c_.head_dim, g = h / c_.group;
    const float* qv = query_row(t, h);
    const KvLayerView view = kv();
    double max_dot_err = 0, max_score = 0, max_v = 0, max_rot = 0;
    const std::vector<int64_t> slots = visible_slots(t);
    const int keys = static_cast<int>(slots.size());
    for (const int64_t slot : slots) {
      const std::vector<float> kr = decoded(view, Plane::Key, slot * c_.kv_heads + g);
      const std::vector<float> vr = decoded(view, Plane::Value, slot * c_.kv_heads + g);
      const std::vector<float> yr = decoded(view, Plane::RotatedValue, slot * c_.kv_heads + g);
      double mag = 0, dot = 0;
      for (int d = 0; d < D; ++d) {
        mag += std::fabs(qv[d] * kr[static_cast<size_t>(d)]);
        dot += qv[d] * kr[static_cast<size_t>(d)];
        max_v = std::max({max_v, double{std::fabs(vr[static_cast<size_t>(d)])},
                          double{std::fabs(yr[static_cast<size_t>(d)])}});
        max_rot = std::max(max_rot, double{std::fabs(yr[static_cast<size_t>(d)])});
      }
      max_dot_err = std::max(max_dot_err, (D + 3) * kEps * mag * params().scale);
      max_score = std::max(max_score, std::fabs(dot * params().scale));
    }
    const double delta = max_dot_err + 4 * kEps * max_score + 2 * kEps;
    const double rotation = 2 * (std::log2(D) + 2) * kEps * std::sqrt(D) * max_rot;
    return 2 * max_v * (std::expm1(2 * delta) + 2 * (keys + keys / 32 + 3) * 2 * kEps) + rotation +
           1e-30;
  }

 private:
  Config c_;
  TurboCache cache_;
};

// Kernel (deferred inverse rotation) = reference (eager decode, explicit mask) for formats ×
// window × sinks × GQA ratio × power-of-two head dims.
TEST(TurboAttention, MatchesReferenceForEveryFormat) {
  testing::for_each_simd_target([&](const std::string&) {
    uint32_t seed = 6000;
    int variant = 0;
    for (Format f : kFormats) {
      ASSERT_NO_FATAL_FAILURE(testing::for_each_sweep_shape(
          {32, 64, 128, 256}, variant, [&](const testing::AttentionShape& shape) {
            const Config c{shape, f};
            SCOPED_TRACE(describe(c));
            TurboSetup s(c, testing::kSweepRows, seed++);
            testing::check_matches_reference(s);
          }));
    }
  });
}

// A row's output is bitwise the same alone as in the batch, under any thread split.
TEST(TurboAttention, RowAloneEqualsRowInBatch) {
  for (Format f : kFormats) {
    Config c;
    c.format = f;
    c.group = 2;
    c.window = f.value_bits == 3 ? 9 : 0;
    c.sinks = f.value_bits == 3 ? 2 : 0;
    TurboSetup s(c, testing::kMixedRows, 7000);
    ASSERT_NO_FATAL_FAILURE(testing::check_rows_alone_equal_batch(s, describe(c)));
  }
}

TEST(TurboAttention, BadViewsAreErrors) {
  Config c;
  TurboSetup s(c, {{1, 4}}, 8000);
  Owned out(DType::F32, {1, s.q_heads(), c.head_dim});
  KvLayerView kv = s.kv();
  kv.value_bits = 6;
  EXPECT_THROW(attention(s.q().t(), kv, s.rows(), s.params(), out.t()), Error);
  kv = s.kv();
  kv.k_biases = Tensor();  // zero points missing
  EXPECT_THROW(attention(s.q().t(), kv, s.rows(), s.params(), out.t()), Error);
  kv = s.kv();
  kv.value_bits = 4;  // value rows hold 3-bit codes
  EXPECT_THROW(attention(s.q().t(), kv, s.rows(), s.params(), out.t()), Error);
  kv = s.kv();
  kv.group_size = 64;
  EXPECT_THROW(attention(s.q().t(), kv, s.rows(), s.params(), out.t()), Error);
}

}  // namespace
}  // namespace ringlm::ops
