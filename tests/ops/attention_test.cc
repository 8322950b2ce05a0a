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

#include "attention_check.h"
#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops {
namespace {

using testing::for_each_simd_target;
using testing::kEps;
using testing::KvWriteInput;
using testing::Owned;
using testing::RowSpec;

struct Config : testing::AttentionShape {
  DType dtype = DType::BF16;
};

const std::vector<RowSpec>& kRows = testing::kMixedRows;

std::string describe(const Config& c) {
  std::ostringstream os;
  os << testing::dtype_label(c.dtype) << " " << testing::describe_shape(c)
     << " softcap=" << c.softcap;
  return os.str();
}

// A paged cache of the config's dtype holding the rows' K/V, and the step's queries. Unwritten
// slots (and so the null block) hold NaN: reading any of them poisons the output.
class PagedSetup : public testing::PagedAttentionCase {
 public:
  PagedSetup(const Config& c, const std::vector<RowSpec>& specs, uint32_t seed)
      : PagedAttentionCase(c, specs, seed),
        c_(c),
        k_(c.dtype, {num_blocks(), c.block_tokens, c.kv_heads, c.head_dim}),
        v_(c.dtype, {num_blocks(), c.block_tokens, c.kv_heads, c.head_dim}) {
    for (int64_t i = 0; i < k_.t().numel(); ++i) {
      k_.set(i, NAN);
      v_.set(i, NAN);
    }
    write_kv(kv(), -1.0f, 1.0f);
  }

  KvLayerView kv() const { return KvLayerView{k_.t(), v_.t()}; }

  // Error bound for query token t, head h.
  double tolerance(int64_t t, int h) const {
    const int D = c_.head_dim, g = h / c_.group;
    const float* qv = query_row(t, h);
    double max_dot_err = 0, max_score = 0, max_v = 0;
    const std::vector<int64_t> slots = visible_slots(t);
    const int keys = static_cast<int>(slots.size());
    for (const int64_t slot : slots) {
      double mag = 0, dot = 0;
      for (int d = 0; d < D; ++d) {
        const double kd = k_.f((slot * c_.kv_heads + g) * D + d);
        mag += std::fabs(qv[d] * kd);
        dot += qv[d] * kd;
        max_v = std::max(max_v, double{std::fabs(v_.f((slot * c_.kv_heads + g) * D + d))});
      }
      max_dot_err = std::max(max_dot_err, (D + 2) * kEps * mag * params().scale);
      max_score = std::max(max_score, std::fabs(dot * params().scale));
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
  Owned k_, v_;
};

void compare_with_reference(const Config& c, uint32_t seed,
                            const std::vector<RowSpec>& rows = kRows) {
  SCOPED_TRACE(describe(c));
  PagedSetup s(c, rows, seed);
  testing::check_matches_reference(s);
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
    const int64_t blocks = KvWriteInput::kBlocks, bt = KvWriteInput::kBlockTokens, kvh = 3, D = 20;
    const KvWriteInput in(kvh, D, -70000.0f, 70000.0f);  // includes f16 overflow to inf
    Owned ck(dt, {blocks, bt, kvh, D}), cv(dt, {blocks, bt, kvh, D});
    Owned rk(dt, {blocks, bt, kvh, D}), rv(dt, {blocks, bt, kvh, D});
    KvLayerView view{ck.t(), cv.t()}, ref_view{rk.t(), rv.t()};
    kv_write(in.k.t(), in.v.t(), in.slots.t(), view);
    reference::kv_write(in.k.t(), in.v.t(), in.slots.t(), ref_view);
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
        ASSERT_NO_FATAL_FAILURE(compare_with_reference(c, seed++, rows));
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
    ASSERT_NO_FATAL_FAILURE(testing::check_rows_alone_equal_batch(s, describe(c)));
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
