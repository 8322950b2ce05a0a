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

#include "kv/affine_codec.h"
#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::kEps;
using testing::Owned;

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
      const int64_t blocks = 5, bt = 4, kvh = 3, T = 7;
      Owned k(DType::F32, {T, kvh, D}), v(DType::F32, {T, kvh, D}), slots(DType::I32, {T});
      testing::fill_uniform(k, 500, -3.0f, 5.0f);
      testing::fill_uniform(v, 501);
      const int32_t s[T] = {19, 0, 5, 6, 12, 3, 17};
      for (int64_t t = 0; t < T; ++t) slots.p<int32_t>()[t] = s[t];
      AffineCache cache(f, blocks, bt, kvh, D), ref(f, blocks, bt, kvh, D);
      KvLayerView view = cache.view(), ref_view = ref.view();
      kv_write(k.t(), v.t(), slots.t(), view);
      reference::kv_write(k.t(), v.t(), slots.t(), ref_view);
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
      kv::affine_quantize(k.p<float>() + (2 * kvh + 1) * D, D, af, codes.data(), scales.data(),
                          biases.data());
      const int64_t row = s[2] * kvh + 1;
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
          const int64_t slot = s[t], gi = (slot * kvh + e / D) * (D / f.group) + e % D / f.group;
          const double sc = std::fabs(bf16_to_f32(cache.ks.p<bf16_t>()[gi]));
          const double bi = std::fabs(bf16_to_f32(cache.kb.p<bf16_t>()[gi]));
          const double bound = sc * (1 + 1e-3) + ((1 << f.bits) * sc + bi) / 256.0;
          ASSERT_NEAR(dequantized(view, false, slot, e), k.p<float>()[t * kvh * D + e], bound)
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

struct RowSpec {
  int n;    // queries this step
  int ctx;  // context length after this step's writes
};

struct Config {
  Format format{8, 64};
  int head_dim = 64;
  int kv_heads = 2;
  int group = 1;  // q heads per kv head
  int block_tokens = 16;
  int window = 0;
  int sinks = 0;
};

std::string describe(const Config& c) {
  std::ostringstream os;
  os << "int" << c.format.bits << "-g" << c.format.group << " D=" << c.head_dim
     << " kvh=" << c.kv_heads << " group=" << c.group << " bt=" << c.block_tokens
     << " window=" << c.window << " sinks=" << c.sinks;
  return os.str();
}

bool visible(const Config& c, int pos, int j) {
  return j <= pos && (c.window <= 0 || j > pos - c.window || j < c.sinks);
}

// Rows of K/V written through kv_write into shuffled blocks; blocks no query sees become the
// null block (NaN scales), as the KV layer releases them.
class AffineSetup {
 public:
  AffineSetup(const Config& c, const std::vector<RowSpec>& specs, uint32_t seed)
      : c_(c), cache_(c.format, blocks_for(c, specs), c.block_tokens, c.kv_heads, c.head_dim) {
    const int bt = c.block_tokens;
    int max_ctx = 0;
    for (const RowSpec& s : specs) max_ctx = std::max(max_ctx, s.ctx);
    max_blocks_ = (max_ctx + bt - 1) / bt;
    std::vector<int32_t> ids(static_cast<size_t>(blocks_for(c, specs) - 1));
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    table_.assign(specs.size() * static_cast<size_t>(max_blocks_), 0);
    size_t next = 0;
    query_start_.push_back(0);
    int total = 0;
    for (size_t r = 0; r < specs.size(); ++r) {
      for (int b = 0; b < (specs[r].ctx + bt - 1) / bt; ++b) table_at(r, b) = ids[next++];
      query_start_.push_back(query_start_.back() + specs[r].n);
      context_len_.push_back(specs[r].ctx);
      total += specs[r].ctx;
    }
    Owned ks(DType::F32, {total, c.kv_heads, c.head_dim}),
        vs(DType::F32, {total, c.kv_heads, c.head_dim}), slots(DType::I32, {total});
    testing::fill_uniform(ks, seed + 1, -2.0f, 3.0f);
    testing::fill_uniform(vs, seed + 2, -2.0f, 2.0f);
    int t = 0;
    for (size_t r = 0; r < specs.size(); ++r) {
      for (int j = 0; j < specs[r].ctx; ++j, ++t)
        slots.p<int32_t>()[t] = table_at(r, j / bt) * bt + j % bt;
    }
    KvLayerView view = cache_.view();
    kv_write(ks.t(), vs.t(), slots.t(), view);
    for (size_t r = 0; r < specs.size(); ++r) {
      for (int b = 0; b < (specs[r].ctx + bt - 1) / bt; ++b) {
        bool seen = false;
        for (int pos = specs[r].ctx - specs[r].n; pos < specs[r].ctx; ++pos) {
          for (int j = b * bt; j < std::min(specs[r].ctx, (b + 1) * bt); ++j)
            seen = seen || visible(c, pos, j);
        }
        if (!seen) table_at(r, b) = 0;
      }
    }
    q_ = Owned(DType::F32, {query_start_.back(), c.kv_heads * c.group, c.head_dim});
    testing::fill_uniform(q_, seed + 3, -2.0f, 2.0f);
    rows_ = {static_cast<int>(specs.size()), query_start_.data(), context_len_.data(),
             table_.data(), max_blocks_};
    params_.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    params_.window = c.window;
    params_.sink_tokens = c.sinks;
  }

  KvLayerView kv() const { return cache_.view(); }
  const AttentionRows& rows() const { return rows_; }
  const AttentionParams& params() const { return params_; }
  Owned& q() { return q_; }
  int64_t tokens() const { return query_start_.back(); }
  int q_heads() const { return c_.kv_heads * c_.group; }
  const int32_t* table_row(size_t r) const {
    return table_.data() + r * static_cast<size_t>(max_blocks_);
  }
  int max_blocks() const { return max_blocks_; }
  const std::vector<int32_t>& query_start() const { return query_start_; }

  // The dense attention tests' error bound (tests/ops/attention_test.cc), over the dequantized
  // K/V: both sides compute the same f32 dequantized values (the kernel may fuse scale·q + bias
  // into one FMA: one more rounding per element, covered by D + 3 instead of D + 2).
  double tolerance(int64_t t, int h) const {
    const int r = static_cast<int>(std::upper_bound(query_start_.begin(), query_start_.end(), t) -
                                   query_start_.begin()) -
                  1;
    const int n = query_start_[static_cast<size_t>(r) + 1] - query_start_[static_cast<size_t>(r)];
    const int pos = context_len_[static_cast<size_t>(r)] - n +
                    static_cast<int>(t - query_start_[static_cast<size_t>(r)]);
    const int D = c_.head_dim, g = h / c_.group, bt = c_.block_tokens;
    const float* qv = q_.p<float>() + (t * q_heads() + h) * D;
    const KvLayerView view = kv();
    double max_dot_err = 0, max_score = 0, max_v = 0;
    int keys = 0;
    for (int j = 0; j <= pos; ++j) {
      if (!visible(c_, pos, j)) continue;
      ++keys;
      const int64_t slot = int64_t{table_row(static_cast<size_t>(r))[j / bt]} * bt + j % bt;
      double mag = 0, dot = 0;
      for (int d = 0; d < D; ++d) {
        const double kd = dequantized(view, false, slot, g * D + d);
        mag += std::fabs(qv[d] * kd);
        dot += qv[d] * kd;
        max_v = std::max(max_v, double{std::fabs(dequantized(view, true, slot, g * D + d))});
      }
      max_dot_err = std::max(max_dot_err, (D + 3) * kEps * mag * params_.scale);
      max_score = std::max(max_score, std::fabs(dot * params_.scale));
    }
    const double delta = max_dot_err + 4 * kEps * max_score + 2 * kEps;
    return 2 * max_v * (std::expm1(2 * delta) + 2 * (keys + keys / 32 + 3) * 2 * kEps) + 1e-30;
  }

 private:
  static int64_t blocks_for(const Config& c, const std::vector<RowSpec>& specs) {
    int64_t n = 1;
    for (const RowSpec& s : specs) n += (s.ctx + c.block_tokens - 1) / c.block_tokens;
    return n + 3;
  }
  int32_t& table_at(size_t r, int b) {
    return table_[r * static_cast<size_t>(max_blocks_) + static_cast<size_t>(b)];
  }

  Config c_;
  AffineCache cache_;
  int max_blocks_ = 0;
  Owned q_;
  std::vector<int32_t> table_, query_start_, context_len_;
  AttentionRows rows_;
  AttentionParams params_;
};

// Kernel = reference for every format × window × sinks × GQA ratio × head dim (32 and 96 are
// the small and the non-power-of-two head dims groups of 32 allow; groups of 64 need D % 64 = 0).
TEST(AffineAttention, MatchesReferenceForEveryFormat) {
  const std::vector<RowSpec> rows = {{1, 37}, {40, 70}, {7, 45}, {0, 5}, {3, 3}, {1, 90}};
  const std::vector<std::pair<int, int>> window_sinks = {{0, 0}, {5, 0}, {16, 4}, {40, 33}};
  testing::for_each_simd_target([&](const std::string&) {
    uint32_t seed = 3000;
    int variant = 0;
    for (Format f : kFormats) {
      for (int D : {32, 64, 96, 128, 256}) {
        if (D % f.group != 0) continue;
        for (auto [window, sinks] : window_sinks) {
          Config c;
          c.format = f;
          c.head_dim = D;
          c.window = window;
          c.sinks = sinks;
          c.group = std::array{1, 2, 4}[variant % 3];
          c.kv_heads = D >= 256 ? 1 : 2;
          c.block_tokens = std::array{16, 7, 1}[(variant / 3) % 3];
          ++variant;
          SCOPED_TRACE(describe(c));
          AffineSetup s(c, rows, seed++);
          const int64_t T = s.tokens();
          const int QH = s.q_heads();
          Owned out(DType::F32, {T, QH, D}), ref(DType::F32, {T, QH, D});
          attention(s.q().t(), s.kv(), s.rows(), s.params(), out.t());
          reference::attention(s.q().t(), s.kv(), s.rows(), s.params(), ref.t());
          for (int64_t t = 0; t < T; ++t) {
            for (int h = 0; h < QH; ++h) {
              const double tol = s.tolerance(t, h);
              for (int d = 0; d < D; ++d) {
                const int64_t i = (t * QH + h) * D + d;
                ASSERT_NEAR(out.f(i), ref.f(i), tol) << "token " << t << " head " << h;
              }
            }
          }
        }
      }
    }
  });
}

// A row's output is bitwise the same alone as in the batch, under any thread split.
TEST(AffineAttention, RowAloneEqualsRowInBatch) {
  const std::vector<RowSpec> rows = {{1, 37}, {20, 20}, {7, 45}, {0, 5}, {3, 3}, {1, 1}};
  for (Format f : kFormats) {
    Config c;
    c.format = f;
    c.group = 2;
    c.window = f.bits == 4 ? 9 : 0;
    c.sinks = f.bits == 4 ? 2 : 0;
    AffineSetup s(c, rows, 4000);
    const int QH = s.q_heads(), D = c.head_dim;
    Owned batched(DType::F32, {s.tokens(), QH, D});
    {
      testing::ScopedThreads threads(3);
      attention(s.q().t(), s.kv(), s.rows(), s.params(), batched.t());
    }
    for (size_t r = 0; r < rows.size(); ++r) {
      const int q0 = s.query_start()[r], n = rows[r].n;
      if (n == 0) continue;
      const int32_t qs[2] = {0, n};
      const int32_t ctx = rows[r].ctx;
      AttentionRows one{1, qs, &ctx, s.table_row(r), s.max_blocks()};
      Owned alone(DType::F32, {n, QH, D});
      attention(s.q().t().slice_rows(q0, q0 + n), s.kv(), one, s.params(), alone.t());
      ASSERT_TRUE(testing::bitwise_equal(alone.t(), batched.t().slice_rows(q0, q0 + n)))
          << describe(c) << " row " << r;
    }
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
