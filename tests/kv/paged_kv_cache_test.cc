#include "kv/paged_kv_cache.h"

#include <gtest/gtest.h>

#include <set>

#include "kv/step_plan.h"

namespace ringlm::kv {
namespace {

KvCacheConfig small() {
  KvCacheConfig c;
  c.num_layers = 2;
  c.kv_heads = 2;
  c.head_dim = 4;
  c.block_tokens = 4;
  c.num_blocks = 9;  // 8 usable + null
  return c;
}

TEST(PagedKvCache, ReservesReleasesAndNeverHandsOutTheNullBlock) {
  PagedKvCache cache(small());
  EXPECT_EQ(cache.free_blocks(), 8);
  const auto a = cache.add_sequence();
  const auto b = cache.add_sequence();
  ASSERT_TRUE(cache.reserve(a, 9));  // 3 blocks
  ASSERT_TRUE(cache.reserve(b, 4));  // 1 block
  EXPECT_EQ(cache.used_blocks(), 4);
  EXPECT_FALSE(cache.reserve(b, 4 * 6));  // would need 5 more, only 4 free: nothing changes
  EXPECT_EQ(cache.block_table(b).size(), 1u);
  std::set<int32_t> seen;
  for (auto s : {a, b}) {
    for (int32_t block : cache.block_table(s)) {
      EXPECT_NE(block, 0);
      EXPECT_TRUE(seen.insert(block).second);
    }
  }
  EXPECT_EQ(cache.slot(a, 5), cache.block_table(a)[1] * 4 + 1);
  EXPECT_THROW(cache.slot(b, 4), Error);
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(PagedKvCache, LayerViewsDoNotOverlap) {
  PagedKvCache cache(small());
  auto l0 = cache.layer_view(0), l1 = cache.layer_view(1);
  EXPECT_EQ(l0.k.nbytes(), l0.v.nbytes());
  EXPECT_EQ(static_cast<char*>(l0.v.data), static_cast<char*>(l0.k.data) + l0.k.nbytes());
  EXPECT_EQ(static_cast<char*>(l1.k.data), static_cast<char*>(l0.v.data) + l0.v.nbytes());
  EXPECT_EQ(l1.k.shape[0], 9);
}

TEST(StepPlan, FlattensRowsWithPositionsSlotsAndLogitRows) {
  PagedKvCache cache(small());
  const auto a = cache.add_sequence();
  const auto b = cache.add_sequence();
  ASSERT_TRUE(cache.reserve(a, 6));
  ASSERT_TRUE(cache.reserve(b, 3));
  // Row a: decode token at position 5; row b: a 3-token prefill wanting all logits.
  StepPlan plan({{a, {11}, 5, false, true}, {b, {1, 2, 3}, 0, true, true}}, cache);
  EXPECT_EQ(plan.num_tokens(), 4);
  EXPECT_EQ(plan.num_rows(), 2);
  const auto* pos = plan.positions().ptr<int32_t>();
  EXPECT_EQ(pos[0], 5);
  EXPECT_EQ(pos[3], 2);
  EXPECT_EQ(plan.slots().ptr<int32_t>()[0], cache.slot(a, 5));
  EXPECT_EQ(plan.logit_tokens(), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.logits_count(1), 3);
  const auto& rows = plan.attention_rows();
  EXPECT_EQ(rows.context_len[0], 6);
  EXPECT_EQ(rows.context_len[1], 3);
  EXPECT_EQ(rows.query_start[2], 4);
  EXPECT_EQ(rows.block_table[rows.max_blocks], cache.block_table(b)[0]);
  EXPECT_EQ(rows.block_table[1], cache.block_table(a)[1]);
}

}  // namespace
}  // namespace ringlm::kv
