// Scheduler on a bare PagedKvCache (no model): decode rows first, chunked prefill under the
// budget, FCFS admission with head-of-line waiting, preemption of the newest sequence (requeued
// at the front, recomputing prompt + generated), fork sharing the prompt's blocks, no leaks.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ringlm::engine {
namespace {

kv::KvCacheConfig config(int64_t blocks, int64_t step_tokens) {
  kv::LayerKvSpec s;
  s.kv_heads = 1;
  s.head_dim = 2;
  kv::KvCacheConfig c;
  c.layers = {s};
  c.block_tokens = 4;
  c.group_blocks = {blocks};
  c.max_step_tokens = step_tokens;
  return c;
}

SeqState make_seq(uint64_t order, int32_t prompt_len) {
  SeqState s;
  s.order = order;
  s.tokens.resize(static_cast<size_t>(prompt_len));
  std::iota(s.tokens.begin(), s.tokens.end(), static_cast<int32_t>(order * 100));
  s.prompt_len = prompt_len;
  return s;
}

// Completes the step and gives every row that wanted logits a new token.
void finish_step(Scheduler& scheduler, const ScheduledStep& step) {
  scheduler.complete(step);
  for (size_t r = 0; r < step.rows.size(); ++r) {
    if (step.rows[r].want_logits) step.seqs[r]->tokens.push_back(7);
  }
}

TEST(Scheduler, DecodeFirstThenPrefillChunksThenAdmission) {
  kv::PagedKvCache cache(config(40, 8));
  Scheduler scheduler(cache, {8, 4});
  SeqState a = make_seq(1, 10), b = make_seq(2, 5);
  scheduler.enqueue(&a);
  scheduler.enqueue(&b);
  auto step = scheduler.schedule();  // a's first chunk fills the budget
  ASSERT_EQ(step.rows.size(), 1u);
  EXPECT_EQ(step.rows[0].tokens.size(), 8u);
  EXPECT_FALSE(step.rows[0].want_logits);
  finish_step(scheduler, step);
  step = scheduler.schedule();  // a's last 2 tokens, then b joins with 5 of the 6 left
  ASSERT_EQ(step.rows.size(), 2u);
  EXPECT_EQ(step.seqs[0], &a);
  EXPECT_EQ(step.rows[0].start_position, 8);
  EXPECT_TRUE(step.rows[0].want_logits);
  EXPECT_EQ(step.seqs[1], &b);
  EXPECT_EQ(step.rows[1].tokens.size(), 5u);
  finish_step(scheduler, step);
  step = scheduler.schedule();  // both decode
  ASSERT_EQ(step.rows.size(), 2u);
  EXPECT_EQ(step.rows[0].tokens.size(), 1u);
  EXPECT_EQ(step.rows[0].start_position, 10);
  EXPECT_EQ(step.rows[1].start_position, 5);
  finish_step(scheduler, step);
  scheduler.remove(&a);
  scheduler.remove(&b);
  EXPECT_TRUE(scheduler.idle());
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(Scheduler, PreemptsTheNewestAndRecomputesPromptAndGenerated) {
  // 6 usable blocks of 4 tokens; two sequences of 8 prompt tokens each promise 3 blocks.
  kv::PagedKvCache cache(config(7, 16));
  Scheduler scheduler(cache, {16, 4});
  SeqState a = make_seq(1, 8), b = make_seq(2, 8), c = make_seq(3, 4);
  scheduler.enqueue(&a);
  scheduler.enqueue(&b);
  scheduler.enqueue(&c);  // waits: no room behind a and b (head of line)
  auto step = scheduler.schedule();
  EXPECT_EQ(step.rows.size(), 2u);
  EXPECT_EQ(scheduler.num_waiting(), 1u);
  finish_step(scheduler, step);
  // Decode until a needs a block nobody promised: b (the newest) is preempted.
  int64_t preempted_at = -1;
  for (int i = 0; i < 8 && preempted_at < 0; ++i) {
    step = scheduler.schedule();
    if (!step.preempted.empty()) {
      EXPECT_EQ(step.preempted[0], &b);
      EXPECT_EQ(b.computed, 0);
      EXPECT_EQ(b.kv, -1);
      preempted_at = static_cast<int64_t>(b.tokens.size());
      EXPECT_TRUE(step.failed.empty());
    }
    finish_step(scheduler, step);
  }
  ASSERT_GT(preempted_at, 8);
  EXPECT_EQ(scheduler.preemptions(), 1);
  // b went back in front of c, and later recomputes all its tokens in one chunk.
  scheduler.remove(&a);
  step = scheduler.schedule();
  ASSERT_FALSE(step.rows.empty());
  EXPECT_EQ(step.seqs[0], &b);
  EXPECT_EQ(static_cast<int64_t>(step.rows[0].tokens.size()), preempted_at);
  EXPECT_TRUE(step.rows[0].want_logits);
  finish_step(scheduler, step);
  scheduler.remove(&b);
  scheduler.remove(&c);
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(Scheduler, ForkSharesThePromptBlocks) {
  kv::PagedKvCache cache(config(40, 16));
  Scheduler scheduler(cache, {16, 4});
  SeqState parent = make_seq(1, 10), child = make_seq(2, 1);
  parent.rows = 2;
  scheduler.enqueue(&parent);
  auto step = scheduler.schedule();
  scheduler.complete(step);
  const int64_t used = cache.used_blocks();
  scheduler.fork(&parent, &child);
  EXPECT_EQ(cache.used_blocks(), used);  // 3 blocks, shared
  EXPECT_EQ(cache.block_table(child.kv, 0), cache.block_table(parent.kv, 0));
  EXPECT_EQ(child.tokens, parent.tokens);
  EXPECT_EQ(child.computed, 10);
  parent.tokens.push_back(5);
  child.tokens.push_back(6);
  step = scheduler.schedule();
  ASSERT_EQ(step.rows.size(), 2u);
  EXPECT_EQ(step.rows[1].tokens, std::vector<int32_t>{6});
  // Each wrote into the partial third block: one copy for whoever wrote second.
  EXPECT_EQ(cache.used_blocks(), used + 1);
  EXPECT_EQ(cache.block_table(child.kv, 0)[0], cache.block_table(parent.kv, 0)[0]);
  EXPECT_NE(cache.block_table(child.kv, 0)[2], cache.block_table(parent.kv, 0)[2]);
  scheduler.complete(step);
  scheduler.remove(&parent);
  scheduler.remove(&child);
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(Scheduler, ASequenceThatCanNeverFitFails) {
  kv::PagedKvCache cache(config(4, 16));  // 3 usable blocks: 12 tokens
  Scheduler scheduler(cache, {16, 4});
  SeqState big = make_seq(1, 14);
  scheduler.enqueue(&big);
  const auto step = scheduler.schedule();
  ASSERT_EQ(step.failed.size(), 1u);
  EXPECT_EQ(step.failed[0], &big);
  EXPECT_TRUE(scheduler.idle());
}

}  // namespace
}  // namespace ringlm::engine
