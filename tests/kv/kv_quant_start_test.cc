// The KV precision transition (--kv-quant-start S) under real models: the layout (a bf16
// companion per quantized group), chunking invariance (one prefill chunk = many, bitwise, with S
// inside a chunk or at a boundary), the endpoints (S = 0 is the plain quantized format, S >= the
// length is plain bf16, bitwise; positions < S are bf16's logits bitwise), the memory claims
// (promises for both pools, a sequence past S + lookahead holds no bf16 block, admission gets
// those blocks back, pools end empty), rollback across S, and prefix-cache hits below and above S
// continuing bit-exactly. Batched = serial through joins, leaves, rollbacks, fork and save/load
// runs in kv_schedule_test.cc ("@S" formats); the per-query oracle at the kernel level in
// kv_quant_start_attention_test.cc.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/prefix_cache.h"
#include "engine/runner.h"
#include "kv/step_plan.h"
#include "kv_run_util.h"
#include "kv_test_models.h"
#include "models/model.h"

namespace ringlm {
namespace {

using testing::expect_same_logits;
using testing::Logits;
using testing::run_chunks;
using testing::same_logits;

engine::RunnerConfig config(const std::string& format, int64_t quant_start, bool bounded = false) {
  engine::RunnerConfig rc;
  rc.kv_format = kv::KvFormat::parse(format);
  rc.kv_quant_start = quant_start;
  rc.kv_memory_bytes = size_t{16} << 20;
  rc.block_tokens = 8;
  rc.max_step_tokens = 96;
  if (bounded) {
    rc.max_kv_size = 20;
    rc.kv_keep = 4;
  }
  return rc;
}

std::vector<int32_t> tokens_for(const std::vector<int32_t>& prompt, size_t n) {
  std::vector<int32_t> out;
  for (size_t i = 0; out.size() < n; ++i) out.push_back(prompt[(i * 7 + 3) % prompt.size()]);
  return out;
}

TEST(KvQuantStart, LayoutAddsBf16Companions) {
  auto model = models::load_model(testing::kv_model_dir("gemma3"));
  engine::Runner runner(*model, config("int8-g32", 40));
  const auto& cache = runner.cache();
  ASSERT_EQ(cache.num_groups(), 4);  // sliding + full int8, then their bf16 companions
  for (int g : {0, 1}) {
    const kv::LayerGroup& q = cache.group(g);
    const kv::LayerGroup& d = cache.group(q.dense_group);
    EXPECT_EQ(q.dense_group, g + 2);
    EXPECT_EQ(d.dense_for, g);
    EXPECT_EQ(d.format, kv::KvFormat::dense(DType::BF16));
    EXPECT_EQ(d.kind, q.kind);
    EXPECT_EQ(d.window, q.window);
    EXPECT_EQ(d.layers, q.layers);
    EXPECT_EQ(d.quant_start, 40);
    EXPECT_EQ(cache.cap_blocks(q.dense_group), 5);  // positions < 40 in blocks of 8
  }
  engine::Runner plain(*model, config("int8-g32", 0));  // S = 0: the plain quantized format
  EXPECT_EQ(plain.cache().num_groups(), 2);
  std::vector<kv::LayerKvSpec> dense = {{2, 32, 0, 0, -1, kv::KvFormat::dense(DType::BF16), 8}};
  EXPECT_THROW(kv::make_layout(dense), Error);
  EXPECT_THROW({ engine::Runner bad(*model, config("bf16", 40)); }, Error);
}

// (model, format, --max-kv-size 20)
class KvQuantStartModel
    : public ::testing::TestWithParam<std::tuple<std::string, std::string, bool>> {};

TEST_P(KvQuantStartModel, ChunkingInvariantAndEndpointsExact) {
  const auto& [fixture, format, bounded] = GetParam();
  auto model = models::load_model(testing::kv_model_dir(fixture));
  const auto tokens = tokens_for(testing::kv_model_prompt(fixture), 90);
  const int64_t S = 40;
  const auto rc = config(format, S, bounded);
  // One chunk; 7 at a time (S inside a chunk); [40, ..] (S at a boundary); [39, 2, ..]; decode.
  const Logits one = run_chunks(*model, rc, tokens, {90});
  expect_same_logits(run_chunks(*model, rc, tokens, {7}), one, "chunks of 7");
  expect_same_logits(run_chunks(*model, rc, tokens, {40, 50}), one, "chunks 40, 50");
  expect_same_logits(run_chunks(*model, rc, tokens, {39, 2, 49}), one, "chunks 39, 2, 49");
  expect_same_logits(run_chunks(*model, rc, tokens, {20, 1}), one, "prefill 20, then decode");
  // S = 0: the plain quantized format; S >= the length: plain bf16.
  const Logits quantized = run_chunks(*model, config(format, -1, bounded), tokens, {7});
  const Logits bf16 = run_chunks(*model, config("bf16", -1, bounded), tokens, {7});
  expect_same_logits(run_chunks(*model, config(format, 0, bounded), tokens, {7}), quantized,
                     "S = 0");
  expect_same_logits(run_chunks(*model, config(format, 90, bounded), tokens, {7}), bf16, "S = 90");
  expect_same_logits(run_chunks(*model, config(format, 500, bounded), tokens, {90}), bf16,
                     "S = 500");
  // S = 40: the positions before S are bf16's; after it neither bf16's nor the quantized run's
  // (earlier layers' outputs at positions < S came from bf16 K/V).
  bool differs_bf16 = false, differs_quantized = false;
  for (size_t p = 0; p < one.size(); ++p) {
    if (p < static_cast<size_t>(S)) {
      ASSERT_TRUE(same_logits(one[p], bf16[p])) << "position " << p;
      continue;
    }
    differs_bf16 = differs_bf16 || !same_logits(one[p], bf16[p]);
    differs_quantized = differs_quantized || !same_logits(one[p], quantized[p]);
  }
  EXPECT_TRUE(differs_bf16);
  EXPECT_TRUE(differs_quantized);
}

INSTANTIATE_TEST_SUITE_P(Models, KvQuantStartModel,
                         ::testing::Values(std::tuple{"llama_linear", "int8-g32", false},
                                           std::tuple{"gemma3", "int4-g32", false},
                                           std::tuple{"gemma3", "turbo", true},
                                           std::tuple{"qwen3", "turbo", false},
                                           std::tuple{"random_d64", "int8-g64", true}),
                         [](const auto& param_info) {
                           std::string name =
                               std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
                           for (char& c : name)
                             if (c == '-' || c == ':') c = '_';
                           return name + (std::get<2>(param_info.param) ? "_max_kv_20" : "");
                         });

// One full layer, int8-g32 from S = 20, blocks of 8, lookahead 2: bf16 companion of 4 + 1 blocks.
kv::KvCacheConfig small_cache() {
  kv::KvCacheConfig cfg;
  cfg.layers = {{2, 32, 0, 0, -1, kv::KvFormat::parse("int8-g32"), 20}};
  cfg.block_tokens = 8;
  cfg.lookahead = 2;
  cfg.group_blocks = {40, 4 + 1};
  return cfg;
}

int64_t held(const kv::PagedKvCache& cache, kv::SequenceId s, int g) {
  int64_t n = 0;
  for (int32_t b : cache.block_table(s, g)) n += b != 0;
  return n;
}

TEST(KvQuantStart, PromisesAndReleaseOfTheBf16Pool) {
  kv::PagedKvCache cache(small_cache());
  ASSERT_EQ(cache.num_groups(), 2);
  const int dense = 1;
  EXPECT_EQ(cache.peak_blocks(dense, 100), 3);  // positions < 20
  EXPECT_EQ(cache.peak_blocks(dense, 9), 2);
  const auto a = cache.add_sequence(), b = cache.add_sequence();
  ASSERT_TRUE(cache.reserve(a, 100));  // 13 int8 blocks, 3 bf16 blocks
  // b's bf16 need (2 blocks) no longer fits next to a's promise (4 free, 3 promised).
  EXPECT_FALSE(cache.reserve(b, 9));
  EXPECT_EQ(cache.tokens_available(b, dense), 8);
  ASSERT_TRUE(cache.append(a, 19));
  EXPECT_EQ(held(cache, a, dense), 3);
  ASSERT_TRUE(cache.append(a, 2));  // 21: passes S; the bf16 copy stays for rollbacks
  EXPECT_EQ(held(cache, a, dense), 3);
  EXPECT_EQ(cache.tokens_available(a, dense), kv::kUnlimitedTokens);
  cache.rollback(a, 2);  // back below S: the queries at 19, 20 read bf16 again
  ASSERT_TRUE(cache.append(a, 2));
  ASSERT_TRUE(cache.append(a, 1));  // appended at 21: a rollback could still reach 19
  EXPECT_EQ(held(cache, a, dense), 3);
  ASSERT_TRUE(cache.append(a, 1));  // appended at 22 = S + lookahead: the bf16 copy goes
  EXPECT_EQ(held(cache, a, dense), 0);
  EXPECT_EQ(cache.used_blocks(dense), 0);
  // Past S + lookahead a rollback below S is an error naming the limit, and changes nothing.
  EXPECT_THROW(cache.rollback(a, 5), Error);
  EXPECT_EQ(cache.length(a), 23);
  cache.rollback(a, 2);  // within the lookahead: fine (positions >= 20 read int8 only)
  // The bf16 blocks a gave back admit b.
  EXPECT_TRUE(cache.reserve(b, 9));
  ASSERT_TRUE(cache.append(b, 9));
  EXPECT_EQ(held(cache, b, dense), 2);
  // A fork below S shares the bf16 blocks; writing the shared partial block copies it.
  const auto c = cache.fork(b);
  EXPECT_EQ(cache.used_blocks(dense), 2);
  ASSERT_TRUE(cache.append(c, 1));
  EXPECT_EQ(cache.used_blocks(dense), 3);
  for (auto s : {a, b, c}) cache.release(s);
  EXPECT_EQ(cache.used_blocks(), 0);
}

// A prompt cached (by the engine's prefix cache) and reopened by prompts sharing 24 tokens
// (below S = 40: the bf16 blocks are adopted too) or 56 (past S: only the int8 ones): prefill the
// rest and decode, bit-exactly the logits of a run without the cache.
TEST(KvQuantStart, PrefixCacheHitsContinueExactly) {
  auto model = models::load_model(testing::kv_model_dir("llama_linear"));
  const auto rc = config("int8-g32", 40);
  const auto base = tokens_for(testing::kv_model_prompt("llama_linear"), 64);
  engine::Runner runner(*model, rc);
  auto& cache = runner.cache();
  engine::PrefixCache prefix(cache, {});
  {
    const auto s = cache.add_sequence();
    ASSERT_TRUE(cache.append(s, 64));
    kv::StepPlan plan({{s, base, 0, false, true}}, cache);
    runner.step(plan);
    prefix.store(s, base, 64);
    cache.release(s);
  }
  for (const size_t shared : {24, 56}) {
    SCOPED_TRACE(shared);
    auto tokens = base;
    for (size_t i = shared; i < tokens.size(); ++i) tokens[i] = base[(i * 5) % 30];
    tokens.resize(80);
    for (size_t i = 64; i < 80; ++i) tokens[i] = base[i % 17];
    const Logits want = run_chunks(*model, rc, tokens, {9});
    const auto [seq, cached] = prefix.open(tokens);
    ASSERT_EQ(cached, static_cast<int64_t>(shared));
    EXPECT_EQ(held(cache, seq, 1), shared < 40 ? 3 : 0);  // bf16 blocks adopted below S only
    Logits got(want.begin(), want.begin() + cached);
    for (size_t done = shared; done < tokens.size();) {
      const size_t n = std::min<size_t>(done < 64 ? 9 : 1, tokens.size() - done);
      ASSERT_TRUE(cache.append(seq, static_cast<int64_t>(n)));
      kv::StepPlan plan({testing::chunk_row(seq, tokens, done, n)}, cache);
      testing::append_logits(runner.step(plan), n, model->vocab_size(), got);
      done += n;
    }
    expect_same_logits(got, want, "after a prefix hit of " + std::to_string(shared));
    cache.release(seq);
  }
  prefix.clear();
  EXPECT_EQ(cache.used_blocks(), 0);
}

}  // namespace
}  // namespace ringlm
