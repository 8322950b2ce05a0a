// Shared by the paged KV op tests (dense, affine and turbo caches): kv_write inputs, a step's rows
// laid out over shuffled cache blocks, and the two oracles every cache format is held to — the
// kernel against the dense reference within a per-query bound, and a row's output alone bitwise
// equal to the same row in a batch. Each format's test keeps its cache planes and error bound.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "op_test_util.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm::ops::testing {

// K, V and slots for kv_write tests: 7 tokens scattered over the slots of 5 blocks of 4 tokens.
struct KvWriteInput {
  static constexpr int64_t kBlocks = 5, kBlockTokens = 4, kTokens = 7;
  static constexpr int32_t kSlots[kTokens] = {19, 0, 5, 6, 12, 3, 17};
  Owned k, v, slots;  // F32[T, kv_heads, head_dim] twice, I32[T]
  // Keys uniform in [key_lo, key_hi], values in [-1, 1].
  KvWriteInput(int64_t kv_heads, int64_t head_dim, float key_lo, float key_hi)
      : k(DType::F32, {kTokens, kv_heads, head_dim}),
        v(DType::F32, {kTokens, kv_heads, head_dim}),
        slots(DType::I32, {kTokens}) {
    fill_uniform(k, 500, key_lo, key_hi);
    fill_uniform(v, 501);
    for (int64_t t = 0; t < kTokens; ++t) slots.p<int32_t>()[t] = kSlots[t];
  }
};

struct RowSpec {
  int n;    // queries this step
  int ctx;  // context length after this step's writes
};

// Rows of a decode, a whole prefill, a prefill chunk after earlier tokens, an idle row, a short
// prefill and a first decode token.
inline const std::vector<RowSpec> kMixedRows = {{1, 37}, {20, 20}, {7, 45}, {0, 5}, {3, 3}, {1, 1}};

// The quantized caches' sweep: longer rows, so that windows leave blocks and sinks behind.
inline const std::vector<RowSpec> kSweepRows = {{1, 37}, {40, 70}, {7, 45},
                                                {0, 5},  {3, 3},   {1, 90}};

// The part of an attention test case that does not depend on the cache format.
struct AttentionShape {
  int head_dim = 64;
  int kv_heads = 2;
  int group = 1;  // q heads per kv head
  int block_tokens = 16;
  int window = 0;
  int sinks = 0;  // attention-sink tokens (with a window)
  float softcap = 0.0f;
};

// "D=64 kvh=2 group=1 bt=16 window=0 sinks=0", for traces after the format's name.
inline std::string describe_shape(const AttentionShape& c) {
  std::ostringstream os;
  os << "D=" << c.head_dim << " kvh=" << c.kv_heads << " group=" << c.group
     << " bt=" << c.block_tokens << " window=" << c.window << " sinks=" << c.sinks;
  return os.str();
}

// Whether the query at `pos` sees the key at `j` (the documented rule of ops::AttentionParams).
inline bool visible(const AttentionShape& c, int pos, int j) {
  return j <= pos && (c.window <= 0 || j > pos - c.window || j < c.sinks);
}

// fn(shape) for every head dim × (window, sinks) in {(0, 0), (5, 0), (16, 4), (40, 33)}, the GQA
// ratio (1, 2, 4) and block size (16, 7, 1) cycling with `variant`, which counts across calls; one
// kv head at D >= 256. Stops at the first fatal failure.
inline void for_each_sweep_shape(const std::vector<int>& head_dims, int& variant,
                                 const std::function<void(const AttentionShape&)>& fn) {
  const std::pair<int, int> window_sinks[] = {{0, 0}, {5, 0}, {16, 4}, {40, 33}};
  for (int D : head_dims) {
    for (auto [window, sinks] : window_sinks) {
      AttentionShape c;
      c.head_dim = D;
      c.window = window;
      c.sinks = sinks;
      c.group = std::array{1, 2, 4}[variant % 3];
      c.kv_heads = D >= 256 ? 1 : 2;
      c.block_tokens = std::array{16, 7, 1}[(variant / 3) % 3];
      ++variant;
      fn(c);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// A step's rows over a paged cache: block tables through shuffled, non-contiguous blocks (block 0
// stays unused as the null block), the step's queries and the attention arguments. A format's
// setup derives from it, allocates num_blocks() blocks of its cache and calls write_kv.
class PagedAttentionCase {
 public:
  PagedAttentionCase(const AttentionShape& c, const std::vector<RowSpec>& specs, uint32_t seed)
      : shape_(c), specs_(specs), seed_(seed) {
    const int bt = c.block_tokens;
    int max_ctx = 0;
    num_blocks_ = 1;
    for (const RowSpec& s : specs) {
      max_ctx = std::max(max_ctx, s.ctx);
      num_blocks_ += (s.ctx + bt - 1) / bt;
    }
    num_blocks_ += 3;
    max_blocks_ = (max_ctx + bt - 1) / bt;
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks_ - 1));
    std::iota(ids.begin(), ids.end(), 1);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    table_.assign(specs.size() * static_cast<size_t>(max_blocks_), 0);
    size_t next = 0;
    query_start_.push_back(0);
    for (size_t r = 0; r < specs.size(); ++r) {
      for (int b = 0; b < (specs[r].ctx + bt - 1) / bt; ++b) table_at(r, b) = ids[next++];
      query_start_.push_back(query_start_.back() + specs[r].n);
      context_len_.push_back(specs[r].ctx);
    }
    q_ = Owned(DType::F32, {query_start_.back(), c.kv_heads * c.group, c.head_dim});
    fill_uniform(q_, seed + 3, -2.0f, 2.0f);
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

  int64_t num_blocks() const { return num_blocks_; }
  const AttentionRows& rows() const { return rows_; }
  const AttentionParams& params() const { return params_; }
  Owned& q() { return q_; }
  // F32[head_dim]: query token t, head h.
  const float* query_row(int64_t t, int h) const {
    return q_.p<float>() + (t * q_heads() + h) * shape_.head_dim;
  }
  int64_t tokens() const { return query_start_.back(); }
  int q_heads() const { return shape_.kv_heads * shape_.group; }
  int head_dim() const { return shape_.head_dim; }
  const int32_t* table_row(size_t r) const {
    return table_.data() + r * static_cast<size_t>(max_blocks_);
  }
  int max_blocks() const { return max_blocks_; }
  const std::vector<int32_t>& query_start() const { return query_start_; }
  const std::vector<int32_t>& context_len() const { return context_len_; }

  // The slots of the keys query token t sees, in position order.
  std::vector<int64_t> visible_slots(int64_t t) const {
    const size_t r = static_cast<size_t>(
        std::upper_bound(query_start_.begin(), query_start_.end(), t) - query_start_.begin() - 1);
    const int pos = context_len_[r] - (query_start_[r + 1] - query_start_[r]) +
                    static_cast<int>(t - query_start_[r]);
    const int bt = shape_.block_tokens;
    std::vector<int64_t> slots;
    for (int j = 0; j <= pos; ++j) {
      if (visible(shape_, pos, j)) slots.push_back(int64_t{table_row(r)[j / bt]} * bt + j % bt);
    }
    return slots;
  }

 protected:
  // Writes every row's K/V for positions [0, ctx) through kv_write (keys uniform in
  // [key_lo, key_hi], values in [-2, 2]); then the blocks no query of their row sees (outside
  // every window and the sinks) become the null block, as the KV layer releases them: the format
  // fills its unwritten slots with NaN, so reading one poisons the output.
  void write_kv(KvLayerView view, float key_lo, float key_hi) {
    const AttentionShape& c = shape_;
    const int bt = c.block_tokens;
    int total = 0;
    for (const RowSpec& s : specs_) total += s.ctx;
    Owned ks(DType::F32, {total, c.kv_heads, c.head_dim}),
        vs(DType::F32, {total, c.kv_heads, c.head_dim}), slots(DType::I32, {total});
    fill_uniform(ks, seed_ + 1, key_lo, key_hi);
    fill_uniform(vs, seed_ + 2, -2.0f, 2.0f);
    int t = 0;
    for (size_t r = 0; r < specs_.size(); ++r) {
      for (int j = 0; j < specs_[r].ctx; ++j, ++t)
        slots.p<int32_t>()[t] = table_at(r, j / bt) * bt + j % bt;
    }
    kv_write(ks.t(), vs.t(), slots.t(), view);
    for (size_t r = 0; r < specs_.size(); ++r) {
      for (int b = 0; b < (specs_[r].ctx + bt - 1) / bt; ++b) {
        bool seen = false;
        for (int pos = specs_[r].ctx - specs_[r].n; pos < specs_[r].ctx; ++pos) {
          for (int j = b * bt; j < std::min(specs_[r].ctx, (b + 1) * bt); ++j)
            seen = seen || visible(c, pos, j);
        }
        if (!seen) table_at(r, b) = 0;
      }
    }
  }

 private:
  int32_t& table_at(size_t r, int b) {
    return table_[r * static_cast<size_t>(max_blocks_) + static_cast<size_t>(b)];
  }

  AttentionShape shape_;
  std::vector<RowSpec> specs_;
  uint32_t seed_;
  int64_t num_blocks_ = 0;
  int max_blocks_ = 0;
  Owned q_;
  std::vector<int32_t> table_, query_start_, context_len_;
  AttentionRows rows_;
  AttentionParams params_;
};

// The kernel against the dense reference on the same view, every element within
// s.tolerance(t, h) (the format's bound for query token t, head h). Setup: a PagedAttentionCase
// with kv() and tolerance().
template <class Setup>
void check_matches_reference(Setup& s) {
  const int64_t T = s.tokens();
  const int QH = s.q_heads(), D = s.head_dim();
  Owned out(DType::F32, {T, QH, D}), ref(DType::F32, {T, QH, D});
  attention(s.q().t(), s.kv(), s.rows(), s.params(), out.t());
  reference::attention(s.q().t(), s.kv(), s.rows(), s.params(), ref.t());
  for (int64_t t = 0; t < T; ++t) {
    for (int h = 0; h < QH; ++h) {
      const double tol = s.tolerance(t, h);
      for (int d = 0; d < D; ++d) {
        const int64_t i = (t * QH + h) * D + d;
        ASSERT_NEAR(out.f(i), ref.f(i), tol) << "token " << t << " head " << h << " dim " << d;
      }
    }
  }
}

// Each row's output computed alone is bitwise its rows of the whole batch computed on 3 threads.
template <class Setup>
void check_rows_alone_equal_batch(Setup& s, const std::string& label) {
  const int QH = s.q_heads(), D = s.head_dim();
  Owned batched(DType::F32, {s.tokens(), QH, D});
  {
    ScopedThreads threads(3);
    attention(s.q().t(), s.kv(), s.rows(), s.params(), batched.t());
  }
  for (size_t r = 0; r < s.context_len().size(); ++r) {
    const int q0 = s.query_start()[r], n = s.query_start()[r + 1] - q0;
    if (n == 0) continue;
    const int32_t qs[2] = {0, n};
    const int32_t ctx = s.context_len()[r];
    AttentionRows one{1, qs, &ctx, s.table_row(r), s.max_blocks()};
    Owned alone(DType::F32, {n, QH, D});
    attention(s.q().t().slice_rows(q0, q0 + n), s.kv(), one, s.params(), alone.t());
    ASSERT_TRUE(bitwise_equal(alone.t(), batched.t().slice_rows(q0, q0 + n)))
        << label << " row " << r;
  }
}

}  // namespace ringlm::ops::testing
