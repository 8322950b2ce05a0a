// Paged attention and kv_write vs the dense references (gathered K/V, explicit causal/window
// mask) on every SIMD target: cache dtypes, head dims, GQA ratios, windows, block sizes,
// soft-capping, rows with different query counts and context lengths. Plus batch invariance:
// a row's output is bitwise the same alone or batched, as one prefill chunk or as decode steps,
// under any thread split.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::for_each_simd_target;
using testing::kEps;
using testing::Owned;

struct RowSpec {
  int n;    // queries this step
  int ctx;  // context length after this step's writes
};

struct Config {
  int head_dim = 64;
  int kv_heads = 2;
  int group = 1;  // q heads per kv head
  int block_tokens = 16;
  int window = 0;
  int sinks = 0;  // attention-sink tokens (with a window)
  float softcap = 0.0f;
  DType dtype = DType::BF16;
};

// Whether the query at `pos` sees the key at `j` (the documented rule of ops::AttentionParams).
bool visible(const Config& c, int pos, int j) {
  return j <= pos && (c.window <= 0 || j > pos - c.window || j < c.sinks);
}

// Rows of a decode, a whole prefill, a prefill chunk after earlier tokens, an idle row, a short
// prefill and a first decode token.
const std::vector<RowSpec> kRows = {{1, 37}, {20, 20}, {7, 45}, {0, 5}, {3, 3}, {1, 1}};

std::string describe(const Config& c) {
  std::ostringstream os;
  os << testing::dtype_label(c.dtype) << " D=" << c.head_dim << " kvh=" << c.kv_heads
     << " group=" << c.group << " bt=" << c.block_tokens << " window=" << c.window
     << " sinks=" << c.sinks << " softcap=" << c.softcap;
  return os.str();
}

// A paged cache holding the rows' K/V (written with kv_write through shuffled, non-contiguous
// block tables; block 0 stays unused as the null block), and the step's queries. Blocks that no
// query of their row sees (outside every window and the sinks) are then replaced by the null
// block, as the KV layer releases them: it holds NaN, so reading it poisons the output.
class PagedSetup {
 public:
  PagedSetup(const Config& c, const std::vector<RowSpec>& specs, uint32_t seed) : c_(c) {
    const int bt = c.block_tokens;
    const int max_ctx = std::max_element(specs.begin(), specs.end(), [](auto& a, auto& b) {
                          return a.ctx < b.ctx;
                        })->ctx;
    max_blocks_ = (max_ctx + bt - 1) / bt;
    int blocks_needed = 1;
    for (const RowSpec& s : specs) blocks_needed += (s.ctx + bt - 1) / bt;
    const int num_blocks = blocks_needed + 3;
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks - 1));
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));

    k_ = Owned(c.dtype, {num_blocks, bt, c.kv_heads, c.head_dim});
    v_ = Owned(c.dtype, {num_blocks, bt, c.kv_heads, c.head_dim});
    // Unwritten slots hold NaN: reading any of them poisons the output.
    for (int64_t i = 0; i < k_.t().numel(); ++i) {
      k_.set(i, NAN);
      v_.set(i, NAN);
    }
    table_.assign(specs.size() * static_cast<size_t>(max_blocks_), 0);
    size_t next = 0;
    query_start_.push_back(0);
    for (size_t r = 0; r < specs.size(); ++r) {
      for (int b = 0; b < (specs[r].ctx + bt - 1) / bt; ++b)
        table_[r * static_cast<size_t>(max_blocks_) + static_cast<size_t>(b)] = ids[next++];
      query_start_.push_back(query_start_.back() + specs[r].n);
      context_len_.push_back(specs[r].ctx);
    }
    // Every row's K/V for positions [0, ctx), through kv_write.
    int total = 0;
    for (const RowSpec& s : specs) total += s.ctx;
    Owned ks(DType::F32, {total, c.kv_heads, c.head_dim}),
        vs(DType::F32, {total, c.kv_heads, c.head_dim});
    testing::fill_uniform(ks, seed + 1);
    testing::fill_uniform(vs, seed + 2, -2.0f, 2.0f);
    Owned slots(DType::I32, {total});
    int t = 0;
    for (size_t r = 0; r < specs.size(); ++r) {
      for (int j = 0; j < specs[r].ctx; ++j, ++t) {
        slots.p<int32_t>()[t] =
            table_[r * static_cast<size_t>(max_blocks_) + static_cast<size_t>(j / bt)] * bt +
            j % bt;
      }
    }
    KvLayerView view = kv();
    kv_write(ks.t(), vs.t(), slots.t(), view);
    for (size_t r = 0; r < specs.size(); ++r) {
      for (int b = 0; b < (specs[r].ctx + bt - 1) / bt; ++b) {
        bool seen = false;
        for (int pos = specs[r].ctx - specs[r].n; pos < specs[r].ctx; ++pos) {
          for (int j = b * bt; j < std::min(specs[r].ctx, (b + 1) * bt); ++j)
            seen = seen || visible(c, pos, j);
        }
        if (!seen) table_[r * static_cast<size_t>(max_blocks_) + static_cast<size_t>(b)] = 0;
      }
    }

    q_ = Owned(DType::F32, {query_start_.back(), c.kv_heads * c.group, c.head_dim});
    testing::fill_uniform(q_, seed + 3, -2.0f, 2.0f);
    rows_.num_rows = static_cast<int>(specs.size());
    rows_.query_start = query_start_.data();
    rows_.context_len = context_len_.data();
    rows_.block_table = table_.data();
    rows_.max_blocks = max_blocks_;
    params_.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    params_.softcap = c.softcap;
    params_.window = c.window;
    params_.sink_tokens = c.sinks;
  }

  KvLayerView kv() const { return KvLayerView{k_.t(), v_.t()}; }
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
  const std::vector<int32_t>& context_len() const { return context_len_; }

  // Error bound for query token t, head h (see the derivation in CompareWithReference).
  double tolerance(int64_t t, int h) const {
    const int r = static_cast<int>(std::upper_bound(query_start_.begin(), query_start_.end(), t) -
                                   query_start_.begin()) -
                  1;
    const int n = query_start_[static_cast<size_t>(r) + 1] - query_start_[static_cast<size_t>(r)];
    const int pos = context_len_[static_cast<size_t>(r)] - n +
                    static_cast<int>(t - query_start_[static_cast<size_t>(r)]);
    const int D = c_.head_dim, g = h / c_.group, bt = c_.block_tokens;
    const float* qv = q_.p<float>() + (t * q_heads() + h) * D;
    double max_dot_err = 0, max_score = 0, max_v = 0;
    int keys = 0;
    for (int j = 0; j <= pos; ++j) {
      if (!visible(c_, pos, j)) continue;
      ++keys;
      const int64_t slot = int64_t{table_row(static_cast<size_t>(r))[j / bt]} * bt + j % bt;
      double mag = 0, dot = 0;
      for (int d = 0; d < D; ++d) {
        const double kd = k_.f((slot * c_.kv_heads + g) * D + d);
        mag += std::fabs(qv[d] * kd);
        dot += qv[d] * kd;
        max_v = std::max(max_v, double{std::fabs(v_.f((slot * c_.kv_heads + g) * D + d))});
      }
      max_dot_err = std::max(max_dot_err, (D + 2) * kEps * mag * params_.scale);
      max_score = std::max(max_score, std::fabs(dot * params_.scale));
    }
    // Score error: the f32 dot product (γ_D bound) and the scale; soft-capping passes it through
    // (|tanh'| <= 1) and adds tanh's 4 ulp plus two roundings of the cap.
    double delta = max_dot_err + 2 * kEps * max_score;
    if (c_.softcap > 0) delta += 6 * kEps * c_.softcap;
    // exp(s - m): s - m is rounded (<= 2u·max|s|) and exp is within 1 ulp.
    delta += 2 * kEps * max_score + 2 * kEps;
    // Perturbing every score by <= δ moves the normalized output by <= (e^{2δ} - 1)·max|v|; the
    // f32 sums of l and acc over the keys (plus one rescale per 32-key chunk) add
    // <= 2·(keys + keys/32 + 3)·u·max|v|. Doubled for slack.
    return 2 * max_v * (std::expm1(2 * delta) + 2 * (keys + keys / 32 + 3) * kEps) + 1e-30;
  }

 private:
  Config c_;
  int max_blocks_ = 0;
  Owned k_, v_, q_;
  std::vector<int32_t> table_, query_start_, context_len_;
  AttentionRows rows_;
  AttentionParams params_;
};

void compare_with_reference(const Config& c, uint32_t seed) {
  SCOPED_TRACE(describe(c));
  PagedSetup s(c, kRows, seed);
  const int64_t T = s.tokens();
  const int QH = s.q_heads();
  Owned out(DType::F32, {T, QH, c.head_dim}), ref(DType::F32, {T, QH, c.head_dim});
  attention(s.q().t(), s.kv(), s.rows(), s.params(), out.t());
  reference::attention(s.q().t(), s.kv(), s.rows(), s.params(), ref.t());
  for (int64_t t = 0; t < T; ++t) {
    for (int h = 0; h < QH; ++h) {
      const double tol = s.tolerance(t, h);
      for (int d = 0; d < c.head_dim; ++d) {
        const int64_t i = (t * QH + h) * c.head_dim + d;
        ASSERT_NEAR(out.f(i), ref.f(i), tol) << "token " << t << " head " << h << " dim " << d;
      }
    }
  }
}

TEST(Attention, MatchesReferenceAcrossHeadDimsAndDtypes) {
  for_each_simd_target([](const std::string&) {
    int variant = 0;
    for (int D : {32, 64, 80, 128, 256}) {
      for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
        Config c;
        c.head_dim = D;
        c.dtype = dt;
        c.group = std::array{1, 2, 4}[variant % 3];
        c.block_tokens = std::array{1, 16}[variant % 2];
        c.window = std::array{0, 1, 5, 16}[variant % 4];
        c.softcap = variant % 5 == 0 ? 5.0f : 0.0f;
        compare_with_reference(c, 100 + static_cast<uint32_t>(variant));
        ++variant;
      }
    }
  });
}

TEST(Attention, MatchesReferenceAcrossWindowsBlocksAndGqa) {
  for_each_simd_target([](const std::string&) {
    uint32_t seed = 200;
    for (int window : {0, 1, 5, 16}) {
      for (int bt : {1, 16}) {
        for (int group : {1, 2, 4}) {
          Config c;
          c.head_dim = 64;
          c.dtype = DType::BF16;
          c.window = window;
          c.block_tokens = bt;
          c.group = group;
          compare_with_reference(c, seed++);
        }
      }
    }
  });
}

TEST(Attention, SoftcapAndOddHeadDim) {
  for (float cap : {2.0f, 50.0f}) {
    for (int D : {16, 24, 40}) {
      Config c;
      c.head_dim = D;
      c.softcap = cap;
      c.dtype = DType::F32;
      c.group = 3;
      compare_with_reference(c, 300 + static_cast<uint32_t>(D));
    }
  }
}

// window = 1: each query sees only its own key, so the output is exactly its V row.
TEST(Attention, WindowOfOneReturnsOwnValue) {
  Config c;
  c.window = 1;
  c.dtype = DType::F16;
  PagedSetup s(c, kRows, 400);
  Owned out(DType::F32, {s.tokens(), s.q_heads(), c.head_dim});
  attention(s.q().t(), s.kv(), s.rows(), s.params(), out.t());
  const KvLayerView kv = s.kv();
  for (size_t r = 0; r < kRows.size(); ++r) {
    for (int i = 0; i < kRows[r].n; ++i) {
      const int t = s.query_start()[r] + i, pos = kRows[r].ctx - kRows[r].n + i;
      const int64_t slot =
          int64_t{s.table_row(r)[pos / c.block_tokens]} * c.block_tokens + pos % c.block_tokens;
      for (int h = 0; h < s.q_heads(); ++h) {
        for (int d = 0; d < c.head_dim; ++d) {
          const float want =
              f16_to_f32(kv.v.ptr<f16_t>()[(slot * c.kv_heads + h / c.group) * c.head_dim + d]);
          ASSERT_EQ(out.p<float>()[(t * s.q_heads() + h) * c.head_dim + d], want);
        }
      }
    }
  }
}

TEST(KvWrite, MatchesReferenceExactly) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    const int64_t blocks = 5, bt = 4, kvh = 3, D = 20, T = 7;
    Owned k(DType::F32, {T, kvh, D}), v(DType::F32, {T, kvh, D}), slots(DType::I32, {T});
    testing::fill_uniform(k, 500, -70000.0f, 70000.0f);  // includes f16 overflow to inf
    testing::fill_uniform(v, 501);
    const int32_t s[T] = {19, 0, 5, 6, 12, 3, 17};
    for (int64_t t = 0; t < T; ++t) slots.p<int32_t>()[t] = s[t];
    Owned ck(dt, {blocks, bt, kvh, D}), cv(dt, {blocks, bt, kvh, D});
    Owned rk(dt, {blocks, bt, kvh, D}), rv(dt, {blocks, bt, kvh, D});
    KvLayerView view{ck.t(), cv.t()}, ref_view{rk.t(), rv.t()};
    kv_write(k.t(), v.t(), slots.t(), view);
    reference::kv_write(k.t(), v.t(), slots.t(), ref_view);
    EXPECT_TRUE(testing::bitwise_equal(ck.t(), rk.t())) << testing::dtype_label(dt);
    EXPECT_TRUE(testing::bitwise_equal(cv.t(), rv.t())) << testing::dtype_label(dt);
  }
}

// Attention sinks (mlx-lm keep): every window, sink count (below, at and beyond the window,
// beyond a 32-key chunk), GQA ratio, head dim and block size, with long rows whose windows have
// left the sinks behind.
TEST(Attention, MatchesReferenceWithSinks) {
  const std::vector<RowSpec> rows = {{1, 37}, {40, 100}, {7, 45}, {0, 5}, {3, 3}, {1, 90}};
  for_each_simd_target([&](const std::string&) {
    uint32_t seed = 1000;
    int variant = 0;
    for (int window : {1, 5, 16, 40}) {
      for (int sinks : {1, 4, 16, 33}) {
        Config c;
        c.window = window;
        c.sinks = sinks;
        c.group = std::array{1, 2, 4}[variant % 3];
        c.head_dim = std::array{16, 64, 80}[variant % 3];
        c.block_tokens = std::array{1, 16, 7}[(variant / 3) % 3];
        c.dtype = std::array{DType::BF16, DType::F32, DType::F16}[variant % 3];
        c.softcap = variant % 4 == 3 ? 5.0f : 0.0f;
        SCOPED_TRACE(describe(c));
        PagedSetup s(c, rows, seed++);
        const int64_t T = s.tokens();
        const int QH = s.q_heads();
        Owned out(DType::F32, {T, QH, c.head_dim}), ref(DType::F32, {T, QH, c.head_dim});
        attention(s.q().t(), s.kv(), s.rows(), s.params(), out.t());
        reference::attention(s.q().t(), s.kv(), s.rows(), s.params(), ref.t());
        for (int64_t t = 0; t < T; ++t) {
          for (int h = 0; h < QH; ++h) {
            const double tol = s.tolerance(t, h);
            for (int d = 0; d < c.head_dim; ++d) {
              const int64_t i = (t * QH + h) * c.head_dim + d;
              ASSERT_NEAR(out.f(i), ref.f(i), tol) << "token " << t << " head " << h;
            }
          }
        }
        ++variant;
      }
    }
  });
}

// The sinks change the result (so the test above could not pass with them ignored): with
// window 1 and one sink, a late query mixes exactly two values, its own and token 0's.
TEST(Attention, OneSinkAndWindowOneMixesTwoValues) {
  Config c;
  c.window = 1;
  c.sinks = 1;
  c.dtype = DType::F32;
  c.head_dim = 16;
  const std::vector<RowSpec> rows = {{1, 50}};
  PagedSetup s(c, rows, 1100);
  Owned out(DType::F32, {1, s.q_heads(), c.head_dim});
  attention(s.q().t(), s.kv(), s.rows(), s.params(), out.t());
  const KvLayerView kv = s.kv();
  const int bt = c.block_tokens;
  for (int h = 0; h < s.q_heads(); ++h) {
    const int g = h / c.group;
    double dots[2] = {0, 0};
    const float* qv = s.q().p<float>() + h * c.head_dim;
    const int positions[2] = {0, 49};
    int64_t slots[2];
    for (int k = 0; k < 2; ++k) {
      slots[k] = int64_t{s.table_row(0)[positions[k] / bt]} * bt + positions[k] % bt;
      for (int d = 0; d < c.head_dim; ++d)
        dots[k] += qv[d] * kv.k.ptr<float>()[(slots[k] * c.kv_heads + g) * c.head_dim + d];
    }
    const double p0 = 1.0 / (1.0 + std::exp((dots[1] - dots[0]) * s.params().scale));
    for (int d = 0; d < c.head_dim; ++d) {
      const double want =
          p0 * kv.v.ptr<float>()[(slots[0] * c.kv_heads + g) * c.head_dim + d] +
          (1 - p0) * kv.v.ptr<float>()[(slots[1] * c.kv_heads + g) * c.head_dim + d];
      ASSERT_NEAR(out.p<float>()[h * c.head_dim + d], want, 1e-5);
    }
  }
}

// ---- Batch invariance ----

TEST(Attention, RowAloneEqualsRowInBatch) {
  for (int window : {0, 5, 3}) {
    Config c;
    c.group = 2;
    c.window = window;
    c.sinks = window == 3 ? 2 : 0;
    c.block_tokens = 16;
    PagedSetup s(c, kRows, 600);
    const int QH = s.q_heads(), D = c.head_dim;
    Owned batched(DType::F32, {s.tokens(), QH, D});
    {
      testing::ScopedThreads threads(3);
      attention(s.q().t(), s.kv(), s.rows(), s.params(), batched.t());
    }
    for (size_t r = 0; r < kRows.size(); ++r) {
      const int q0 = s.query_start()[r], n = kRows[r].n;
      if (n == 0) continue;
      const int32_t qs[2] = {0, n};
      const int32_t ctx = kRows[r].ctx;
      AttentionRows one{1, qs, &ctx, s.table_row(r), s.max_blocks()};
      Owned alone(DType::F32, {n, QH, D});
      attention(s.q().t().slice_rows(q0, q0 + n), s.kv(), one, s.params(), alone.t());
      ASSERT_TRUE(testing::bitwise_equal(alone.t(), batched.t().slice_rows(q0, q0 + n)))
          << "row " << r << " window " << window;
    }
  }
}

// Query i of a prefill equals the same token computed as a single decode step with context i + 1:
// chunking a prompt differently cannot change a row's logits.
TEST(Attention, PrefillEqualsDecodeSteps) {
  for (int window : {0, 16, 9}) {
    Config c;
    c.window = window;
    c.sinks = window == 9 ? 4 : 0;
    c.block_tokens = 16;
    c.group = 4;
    const std::vector<RowSpec> prefill = {{45, 45}};
    PagedSetup s(c, prefill, 700);
    const int QH = s.q_heads(), D = c.head_dim;
    Owned full(DType::F32, {45, QH, D});
    attention(s.q().t(), s.kv(), s.rows(), s.params(), full.t());
    for (int i : {0, 1, 15, 16, 31, 32, 33, 44}) {
      const int32_t qs[2] = {0, 1};
      const int32_t ctx = i + 1;
      AttentionRows step{1, qs, &ctx, s.table_row(0), s.max_blocks()};
      Owned one(DType::F32, {1, QH, D});
      attention(s.q().t().slice_rows(i, i + 1), s.kv(), step, s.params(), one.t());
      ASSERT_TRUE(testing::bitwise_equal(one.t(), full.t().slice_rows(i, i + 1)))
          << "position " << i << " window " << window;
    }
    // And a chunk [20, 45) after a prefix equals the same queries in the full prefill.
    const int32_t qs[2] = {0, 25};
    const int32_t ctx = 45;
    AttentionRows chunk{1, qs, &ctx, s.table_row(0), s.max_blocks()};
    Owned part(DType::F32, {25, QH, D});
    attention(s.q().t().slice_rows(20, 45), s.kv(), chunk, s.params(), part.t());
    ASSERT_TRUE(testing::bitwise_equal(part.t(), full.t().slice_rows(20, 45)));
  }
}

TEST(Attention, ThreadSplitInvariant) {
  Config c;
  c.group = 4;
  c.kv_heads = 3;
  PagedSetup s(c, kRows, 800);
  Owned one(DType::F32, {s.tokens(), s.q_heads(), c.head_dim});
  Owned three(DType::F32, {s.tokens(), s.q_heads(), c.head_dim});
  {
    testing::ScopedThreads threads(1);
    attention(s.q().t(), s.kv(), s.rows(), s.params(), one.t());
  }
  {
    testing::ScopedThreads threads(3);
    attention(s.q().t(), s.kv(), s.rows(), s.params(), three.t());
  }
  EXPECT_TRUE(testing::bitwise_equal(one.t(), three.t()));
}

// out may alias q (the model can reuse the q buffer).
TEST(Attention, OutputMayAliasQuery) {
  Config c;
  PagedSetup s(c, kRows, 900);
  Owned out(DType::F32, {s.tokens(), s.q_heads(), c.head_dim});
  attention(s.q().t(), s.kv(), s.rows(), s.params(), out.t());
  attention(s.q().t(), s.kv(), s.rows(), s.params(), s.q().t());
  EXPECT_TRUE(testing::bitwise_equal(out.t(), s.q().t()));
}

}  // namespace
}  // namespace ringlm::ops
