// --max-kv-size N with keep sinks: the behaviour mlx-lm users know (RotatingKVCache(max_size=N,
// keep)), and a whole model bounded that way against a dense reference of the same mask.
//
// 1. An executable transcription of mlx-lm's RotatingKVCache._update_in_place (one token per
//    update; the reference doc /work/shared/reference/mlx-lm-cache-semantics.md §3, including its
//    worked examples) says which earlier tokens each new token attends to. Both the paged kernel
//    and the reference attention, under the window and sinks apply_max_kv_size gives, must see
//    exactly those keys (read off the output with one-hot values and uniform scores).
// 2. A model run with --max-kv-size (sliding groups releasing blocks, paged kernel) equals the
//    same model run with every block kept and ops::reference::attention applying the explicit
//    keep + window mask; and that mask really differs from full attention.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "engine/runner.h"
#include "kv/layout.h"
#include "kv/step_plan.h"
#include "kv_run_util.h"
#include "models/golden_util.h"
#include "models/model.h"
#include "ops/ops.h"
#include "ops/reference.h"

namespace ringlm {
namespace {

// mlx-lm RotatingKVCache fed one token per update, on token positions (-1: a zero slot). Returns,
// per update, the keys the update returns (the token attends to all of them: for one token the
// mask is None).
class MlxRotatingCache {
 public:
  MlxRotatingCache(int max_size, int keep) : max_size_(max_size), keep_(keep) {}
  std::vector<int> update(int token) {
    const auto T = [&] { return static_cast<int>(buf_.size()); };
    // 1. Grow.
    if (buf_.empty() || (offset_ >= T() && T() < max_size_)) {
      const int grow = std::min(256, max_size_ - offset_);
      buf_.insert(buf_.end(), static_cast<size_t>(grow), -1);
      idx_ = offset_;
    }
    // 2. Trim overflow: concat(v[:keep], v[keep + t:]).
    if (T() > max_size_) {
      const int t = T() - max_size_;
      buf_.erase(buf_.begin() + keep_, buf_.begin() + keep_ + t);
      idx_ = max_size_;
    }
    // 3. Wrap.
    if (idx_ == max_size_) idx_ = keep_;
    // 4. Write.
    buf_[static_cast<size_t>(idx_)] = token;
    ++offset_;
    ++idx_;
    // 5. Return.
    if (offset_ < max_size_) return {buf_.begin(), buf_.begin() + offset_};
    return buf_;
  }
  const std::vector<int>& buffer() const { return buf_; }

 private:
  int max_size_, keep_;
  std::vector<int> buf_;
  int offset_ = 0, idx_ = 0;
};

TEST(MaxKvSize, MlxTranscriptionReproducesTheDocumentedExamples) {
  MlxRotatingCache plain(4, 0);
  for (int t = 0; t <= 4; ++t) plain.update(t);
  EXPECT_EQ(plain.buffer(), (std::vector<int>{4, 1, 2, 3}));
  plain.update(5);
  EXPECT_EQ(plain.buffer(), (std::vector<int>{4, 5, 2, 3}));
  MlxRotatingCache kept(4, 2);
  for (int t = 0; t <= 4; ++t) kept.update(t);
  EXPECT_EQ(kept.buffer(), (std::vector<int>{0, 1, 4, 3}));
  kept.update(5);
  kept.update(6);
  EXPECT_EQ(kept.buffer(), (std::vector<int>{0, 1, 6, 5}));
}

// The keys each query of a `ctx`-token prefill sees under `params`, read off the attention output:
// values are one-hot rows (V[j] = e_j) and all scores are equal, so query i's output is
// 1/|visible| on exactly its visible keys.
std::vector<std::set<int>> visible_sets(const ops::AttentionParams& params, int ctx,
                                        bool reference) {
  const int D = 64, bt = 4, blocks = ctx / bt + 2;
  std::vector<float> k(static_cast<size_t>(blocks * bt * D), 0.0f), v(k.size(), 0.0f);
  std::vector<int32_t> table;
  for (int b = 0; b * bt < ctx; ++b) table.push_back(b + 1);  // block 0: the null block
  for (int j = 0; j < ctx; ++j) v[static_cast<size_t>((bt + j) * D + j)] = 1.0f;
  for (int i = 0; i < bt * D; ++i) k[static_cast<size_t>(i)] = v[static_cast<size_t>(i)] = NAN;
  std::vector<float> q(static_cast<size_t>(ctx * D), 0.0f), out(q.size());
  const int32_t qs[2] = {0, ctx};
  const int32_t len = ctx;
  const ops::AttentionRows rows{1, qs, &len, table.data(), static_cast<int>(table.size())};
  const ops::KvLayerView kv{Tensor(k.data(), DType::F32, {blocks, bt, 1, D}),
                            Tensor(v.data(), DType::F32, {blocks, bt, 1, D})};
  Tensor o(out.data(), DType::F32, {ctx, 1, D});
  const Tensor qt(q.data(), DType::F32, {ctx, 1, D});
  if (reference) {
    ops::reference::attention(qt, kv, rows, params, o);
  } else {
    ops::attention(qt, kv, rows, params, o);
  }
  std::vector<std::set<int>> sets(static_cast<size_t>(ctx));
  for (int i = 0; i < ctx; ++i) {
    for (int d = 0; d < D; ++d) {
      const float x = out[static_cast<size_t>(i * D + d)];
      EXPECT_TRUE(std::isfinite(x)) << "query " << i;
      if (x > 0) sets[static_cast<size_t>(i)].insert(d);
    }
  }
  return sets;
}

TEST(MaxKvSize, EachTokenSeesWhatMlxRotatingCacheReturnsForIt) {
  for (auto [max_size, keep] :
       std::vector<std::pair<int, int>>{{4, 0}, {4, 2}, {8, 3}, {20, 4}, {6, 5}, {33, 4}, {2, 1}}) {
    SCOPED_TRACE(::testing::Message() << "max_size " << max_size << " keep " << keep);
    kv::LayerKvSpec layer;
    layer.kv_heads = 1;
    layer.head_dim = 64;
    const kv::LayerKvSpec bounded = kv::apply_max_kv_size({layer}, max_size, keep)[0];
    ops::AttentionParams params;
    params.window = bounded.window;
    params.sink_tokens = bounded.sink_tokens;
    const int ctx = 60;
    const auto kernel = visible_sets(params, ctx, false);
    const auto reference = visible_sets(params, ctx, true);
    MlxRotatingCache mlx(max_size, keep);
    for (int t = 0; t < ctx; ++t) {
      const std::vector<int> returned = mlx.update(t);
      const std::set<int> want(returned.begin(), returned.end());
      ASSERT_EQ(kernel[static_cast<size_t>(t)], want) << "token " << t << " (paged kernel)";
      ASSERT_EQ(reference[static_cast<size_t>(t)], want) << "token " << t << " (reference)";
    }
  }
}

// Logits of every position of `tokens` through a runner, `chunk` tokens per step: F32[T·vocab].
std::vector<float> runner_logits(models::Model& model, const engine::RunnerConfig& rc,
                                 const std::vector<int32_t>& tokens, size_t chunk) {
  std::vector<float> out;
  for (const std::vector<float>& position : testing::run_chunks(model, rc, tokens, {chunk}))
    out.insert(out.end(), position.begin(), position.end());
  return out;
}

class MaxKvSizeModel : public ::testing::TestWithParam<std::string> {};

TEST_P(MaxKvSizeModel, EqualsDenseReferenceOfTheKeepAndWindowMask) {
  const testing::Golden golden = testing::load_golden(GetParam());
  auto model = models::load_model(testing::fixture_model_dir(GetParam()));
  std::vector<int32_t> tokens = golden.prompt;
  tokens.insert(tokens.end(), golden.prompt.rbegin(), golden.prompt.rbegin() + 40);  // 120 tokens
  const auto T = static_cast<int64_t>(tokens.size());
  const int64_t V = model->vocab_size();
  engine::RunnerConfig rc;
  rc.kv_memory_bytes = size_t{16} << 20;
  rc.block_tokens = 8;
  rc.max_step_tokens = T;
  rc.max_kv_size = 20;
  rc.kv_keep = 4;
  const std::vector<float> paged = runner_logits(*model, rc, tokens, 7);

  // The oracle: every block kept, the explicit-mask reference attention, one step.
  kv::KvCacheConfig kc = engine::kv_cache_config(*model, rc);
  kc.keep_all_blocks = true;
  kv::PagedKvCache cache(kc);
  const auto seq = cache.add_sequence();
  ASSERT_TRUE(cache.append(seq, T));
  kv::StepPlan plan({{seq, tokens, 0, true, true}}, cache);
  plan.set_attention_fn(&ops::reference::attention);
  Arena arena(model->activation_bytes(T, T));
  std::vector<float> dense(static_cast<size_t>(T * V));
  Tensor logits(dense.data(), DType::F32, {T, V});
  model->forward(plan, cache, arena, logits);

  engine::RunnerConfig full_rc = rc;
  full_rc.max_kv_size = 0;
  const std::vector<float> full = runner_logits(*model, full_rc, tokens, 7);
  double most_changed = 0;
  for (int64_t p = 0; p < T; ++p) {
    float max_abs = 0, diff = 0, changed = 0;
    for (int64_t v = 0; v < V; ++v) {
      const auto i = static_cast<size_t>(p * V + v);
      max_abs = std::max(max_abs, std::fabs(dense[i]));
      diff = std::max(diff, std::fabs(dense[i] - paged[i]));
      changed = std::max(changed, std::fabs(full[i] - dense[i]));
    }
    ASSERT_LE(diff, 1e-4f * max_abs) << GetParam() << " position " << p;
    if (p < 20) {  // the window and the sinks still cover every earlier token
      ASSERT_LE(changed, 1e-4f * max_abs) << "position " << p;
    }
    most_changed = std::max(most_changed, static_cast<double>(changed / max_abs));
  }
  EXPECT_GT(most_changed, 1e-2) << "bounding the KV should change later logits";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MaxKvSizeModel,
                         ::testing::Values("llama3", "qwen3", "mistral", "gemma3"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace ringlm
