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

#include "kv/turbo_codec.h"
#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::kEps;
using testing::Owned;

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
      const int64_t blocks = 5, bt = 4, kvh = 3, T = 7;
      Owned k(DType::F32, {T, kvh, D}), v(DType::F32, {T, kvh, D}), slots(DType::I32, {T});
      testing::fill_uniform(k, 500, -3.0f, 5.0f);
      testing::fill_uniform(v, 501);
      const int32_t s[T] = {19, 0, 5, 6, 12, 3, 17};
      for (int64_t t = 0; t < T; ++t) slots.p<int32_t>()[t] = s[t];
      TurboCache cache(f, blocks, bt, kvh, D), ref(f, blocks, bt, kvh, D);
      KvLayerView view = cache.view(), ref_view = ref.view();
      kv_write(k.t(), v.t(), slots.t(), view);
      reference::kv_write(k.t(), v.t(), slots.t(), ref_view);
      for (auto [a, b] : {std::pair{&cache.k, &ref.k},
                          {&cache.v, &ref.v},
                          {&cache.ks, &ref.ks},
                          {&cache.kz, &ref.kz},
                          {&cache.vs, &ref.vs}}) {
        EXPECT_TRUE(testing::bitwise_equal(a->t(), b->t()))
            << "k" << f.key_bits << "v" << f.value_bits << " D=" << D;
      }
      // Token 2's rows of head 1 are the codec's encoding of those rows.
      const int64_t row = s[2] * kvh + 1, groups = D / 32;
      const int d = static_cast<int>(D);
      std::vector<uint8_t> kc(static_cast<size_t>(D * f.key_bits / 8)),
          vc(static_cast<size_t>(D * f.value_bits / 8));
      std::vector<f16_t> sc(static_cast<size_t>(groups)), zc(sc.size()), vsc(sc.size());
      kv::turbo_key_quantize(k.p<float>() + (2 * kvh + 1) * D, d, f.key_bits, kc.data(), sc.data(),
                             zc.data());
      kv::turbo_value_quantize(v.p<float>() + (2 * kvh + 1) * D, d, f.value_bits, vc.data(),
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

struct RowSpec {
  int n;    // queries this step
  int ctx;  // context length after this step's writes
};

struct Config {
  Format format{8, 3};
  int head_dim = 64;
  int kv_heads = 2;
  int group = 1;  // q heads per kv head
  int block_tokens = 16;
  int window = 0;
  int sinks = 0;
};

std::string describe(const Config& c) {
  std::ostringstream os;
  os << "turbo:k" << c.format.key_bits << "v" << c.format.value_bits << " D=" << c.head_dim
     << " kvh=" << c.kv_heads << " group=" << c.group << " bt=" << c.block_tokens
     << " window=" << c.window << " sinks=" << c.sinks;
  return os.str();
}

bool visible(const Config& c, int pos, int j) {
  return j <= pos && (c.window <= 0 || j > pos - c.window || j < c.sinks);
}

// Rows of K/V written through kv_write into shuffled blocks; blocks no query sees become the
// null block (NaN scales), as the KV layer releases them.
class TurboSetup {
 public:
  TurboSetup(const Config& c, const std::vector<RowSpec>& specs, uint32_t seed)
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

  // The dense attention tests' error bound (tests/ops/attention_test.cc) over the decoded K/V
  // (both sides decode keys to the same f32 values), with max_v the larger of the un-rotated and
  // rotated values, plus the rotations' f32 rounding: the reference un-rotates every value row,
  // the kernel the output row; a normalized FWHT of a vector bounded by A is off by at most
  // log2(D)·eps·√D·A per element (each output sums D terms over log2(D) levels), once per side.
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
    double max_dot_err = 0, max_score = 0, max_v = 0, max_rot = 0;
    int keys = 0;
    for (int j = 0; j <= pos; ++j) {
      if (!visible(c_, pos, j)) continue;
      ++keys;
      const int64_t slot = int64_t{table_row(static_cast<size_t>(r))[j / bt]} * bt + j % bt;
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
      max_dot_err = std::max(max_dot_err, (D + 3) * kEps * mag * params_.scale);
      max_score = std::max(max_score, std::fabs(dot * params_.scale));
    }
    const double delta = max_dot_err + 4 * kEps * max_score + 2 * kEps;
    const double rotation = 2 * (std::log2(D) + 2) * kEps * std::sqrt(D) * max_rot;
    return 2 * max_v * (std::expm1(2 * delta) + 2 * (keys + keys / 32 + 3) * 2 * kEps) + rotation +
           1e-30;
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
  TurboCache cache_;
  int max_blocks_ = 0;
  Owned q_;
  std::vector<int32_t> table_, query_start_, context_len_;
  AttentionRows rows_;
  AttentionParams params_;
};

// Kernel (deferred inverse rotation) = reference (eager decode, explicit mask) for formats ×
// window × sinks × GQA ratio × power-of-two head dims.
TEST(TurboAttention, MatchesReferenceForEveryFormat) {
  const std::vector<RowSpec> rows = {{1, 37}, {40, 70}, {7, 45}, {0, 5}, {3, 3}, {1, 90}};
  const std::vector<std::pair<int, int>> window_sinks = {{0, 0}, {5, 0}, {16, 4}, {40, 33}};
  testing::for_each_simd_target([&](const std::string&) {
    uint32_t seed = 6000;
    int variant = 0;
    for (Format f : kFormats) {
      for (int D : {32, 64, 128, 256}) {
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
          TurboSetup s(c, rows, seed++);
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
TEST(TurboAttention, RowAloneEqualsRowInBatch) {
  const std::vector<RowSpec> rows = {{1, 37}, {20, 20}, {7, 45}, {0, 5}, {3, 3}, {1, 1}};
  for (Format f : kFormats) {
    Config c;
    c.format = f;
    c.group = 2;
    c.window = f.value_bits == 3 ? 9 : 0;
    c.sinks = f.value_bits == 3 ? 2 : 0;
    TurboSetup s(c, rows, 7000);
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
